import BLECore
import Crypto
import DFUPackage
import DFUProtocol
import Foundation
import GATT
import PlatformIO
import SecureDFU

/// `bledfu flash` exit codes in the DFU range (40-49).
enum FlashExit {
    /// The device refused a request (remote error); see the message for the result/extended code.
    static let remoteError: Int32 = 40
    /// Checksums kept failing (CRC mismatch or lost bytes) and the engine gave up.
    static let verificationFailed: Int32 = 41
    /// The device stopped answering (checkpoint timeout), also after reconnecting.
    static let timeout: Int32 = 42
    /// The link was lost and reconnecting failed; the journal is kept, run `bledfu resume`.
    static let linkLost: Int32 = 43
    /// No bootloader advertised after the buttonless jump (or after a part reset the device).
    static let bootloaderNotFound: Int32 = 44
    /// The device has no Secure DFU service (FE59) or no usable DFU characteristic.
    static let noDFUService: Int32 = 45
    /// The device broke the DFU protocol, or package and device cannot work together.
    static let protocolError: Int32 = 46

    static let table: [(Int32, String)] = [
        (remoteError, "the device rejected a request (remote error)"),
        (verificationFailed, "CRC/verification kept failing; gave up"),
        (timeout, "the device stopped answering (timeout)"),
        (linkLost, "link lost and reconnects exhausted (resumable: bledfu resume)"),
        (bootloaderNotFound, "bootloader not found after the buttonless jump"),
        (noDFUService, "the device has no Secure DFU service"),
        (protocolError, "protocol violation, or package and device incompatible"),
        (BledfuExit.interrupted, "stopped by Ctrl-C at a safe point (resumable)"),
    ]

    static var helpText: String {
        "Exit codes: 0 success; 30-39 package invalid (see bledfu package verify); 10-20 link errors (bledfu --help);\n"
            + table.map { "  \($0.0)\t\($0.1)" }.joined(separator: "\n")
    }

    static func code(for error: DFUEngineError) -> Int32 {
        switch error.code {
        case .remote: remoteError
        case .crcMismatch, .bytesLost, .gaveUp: verificationFailed
        case .timeout: timeout
        case .disconnected, .transport, .executeUnconfirmed: linkLost
        case .cancelled, .stopped: BledfuExit.interrupted
        default: protocolError
        }
    }
}

/// Which parts of a package to send (`--scope`).
enum FlashScope: String, CaseIterable, Sendable {
    case system, application, all
}

/// Everything `flash`/`resume` decided from the command line.
struct FlashSettings: Sendable {
    enum Target: Sendable {
        case address(BluetoothAddress)
        case name(String)

        var isAddress: Bool { if case .address = self { true } else { false } }
    }

    var packagePath: String
    var keyPaths: [String] = []
    var pacing: String = "adaptive"
    var scope: FlashScope = .all
    var stateDirectory: URL
    var abortOnCancel = false
    var bootloaderName: String?
    var scanTimeout: Double = 10
    var rebootDelay: Double = 0.5
    var reconnectAttempts = 5
    var target: Target
    var addressType: AddressType = .random
    var security: UInt8?
    var adapter: String
    var json = false
    var verbose = false
    var timeout: Double = 10
    var capture: String?
}

/// One `bledfu flash` run: pre-flight, connect, jump, parts, reconnects, journal, summary.
actor FlashSession {
    let settings: FlashSettings
    let adapter: any BLEAdapter
    nonisolated let progress: FlashProgress
    var capture: BTSnoopWriter?
    /// Set by the first Ctrl-C: stop after the next executed object.
    private(set) var stopRequested = false
    /// Between the first connection and the end of the last part: a Ctrl-C then stops at a safe point.
    private var transferUnderWay = false
    /// The engine driving the current part (asked to stop at the next safe point on Ctrl-C).
    private var currentDriver: SecureDFUDriver<ContinuousClock>?
    private var runTask: Task<DFUJournal?, any Error>?
    var deviceAddress = ""

    init(settings: FlashSettings, adapter: any BLEAdapter) {
        self.settings = settings
        self.adapter = adapter
        self.progress = FlashProgress(json: settings.json)
    }

    /// The first Ctrl-C. Returns false when no transfer is under way (the caller then exits at once).
    func interrupt() async -> Bool {
        stopRequested = true
        guard transferUnderWay else { return false }
        if settings.abortOnCancel {
            runTask?.cancel()
        } else {
            progress.message("stopping after the current object (Ctrl-C again to quit at once)")
            await currentDriver?.requestStop()
        }
        return true
    }

    /// The journal store saved an executed object.
    func saved(_ journal: DFUJournal) async {
        progress.count(checkpoint: true)
    }

    var resumeHint: String { "bledfu resume --device \(deviceAddress)" + (settings.adapter == "any" ? "" : " --adapter \(settings.adapter)") }

    /// Runs the whole update. Throws a ``CLIError`` with the exit code.
    func run() async throws(CLIError) {
        let package = try PackageCLI.loadForFlash(settings.packagePath)
        let report = package.verify(keys: try PackageCLI.publicKeysForFlash(settings.keyPaths))
        if let first = report.errors.first { throw PackageCLI.cliError(first) }
        for warning in package.warnings + report.warnings { progress.warning(warning) }
        let parts = Self.selectParts(package, scope: settings.scope)
        guard !parts.isEmpty else {
            throw CLIError("the package has no \(settings.scope) part", exitCode: BledfuExit.packageInvalid)
        }
        let sha = try Self.sha256(ofFile: settings.packagePath)

        // Find the device.
        let peer: PeerAddress
        switch settings.target {
        case .address(let address): peer = PeerAddress(address, type: settings.addressType)
        case .name(let name):
            progress.state("scanning", ["name": name])
            let found = try await findAndConnectByName(name)
            peer = found
        }
        deviceAddress = peer.address.description
        let store = JournalFileStore(
            directory: settings.stateDirectory, packagePath: URL(fileURLWithPath: settings.packagePath).path,
            adapter: settings.adapter, addressType: settings.addressType.rawValue,
            onSaved: { [weak self] journal in await self?.saved(journal) })
        var journal: DFUJournal
        do {
            journal = try await store.load(deviceAddress: deviceAddress, packageSHA256: sha)
                ?? DFUJournal(deviceAddress: deviceAddress, packageSHA256: sha)
        } catch {
            progress.warning("\(error); starting afresh")
            journal = DFUJournal(deviceAddress: deviceAddress, packageSHA256: sha)
        }
        if journal.partIndex > 0 || !journal.executed.isEmpty {
            progress.message("continuing a previous upload: part \(journal.partIndex + 1), \(journal.executedOffset ?? 0) bytes executed")
        }

        // Connect to the bootloader (jumping there from the app if needed).
        progress.state("connecting", ["address": deviceAddress])
        var bootloader = BootloaderTarget(
            addresses: [peer.address, peer.address.nordicBootloaderAddress], name: settings.bootloaderName, type: peer.type)
        var connection: OpenConnection?
        do {
            connection = try await openBootloader(initial: peer, target: &bootloader)
        } catch where [BledfuExit.deviceNotFound, BledfuExit.connectionRefused, BledfuExit.connectionTimeout]
            .contains(error.exitCode) && settings.target.isAddress
        {
            // Not at its own address: it may wait in its bootloader (address + 1) from an earlier run.
            let original = error
            do {
                connection = try await openBootloader(initial: nil, target: &bootloader)
            } catch where error.exitCode == FlashExit.bootloaderNotFound {
                throw original
            }
        }

        var partIndex = min(journal.partIndex, parts.count - 1)
        var budget = ReconnectBudget(policy: ReconnectPolicy(attempts: settings.reconnectAttempts))
        var lastLoss: DFUEngineError?
        var unconfirmed = false
        transferUnderWay = true
        defer { transferUnderWay = false }
        while partIndex < parts.count {
            let part = parts[partIndex]
            var completed = false
            if connection == nil, unconfirmed {
                // The last Execute went unacknowledged: the device runs its application if it took effect.
                unconfirmed = false
                connection = try await confirmExecute(&bootloader, appAddress: peer.address)
                if connection == nil {
                    progress.message("\(part.name): the device restarted into its application: the last Execute took effect")
                    completed = true
                }
            }
            if !completed {
                if connection == nil { connection = try await reconnect(&bootloader, after: lastLoss) }
                guard let link = connection else { continue }
                let before = journal.executedOffset ?? -1
                do {
                    let updated = try await runPart(part, index: partIndex, count: parts.count, link: link, journal: journal, store: store)
                    journal = updated ?? journal
                    completed = true
                    await link.att.close()
                    connection = nil
                } catch {
                    await link.att.close()
                    connection = nil
                    journal = (try? await store.load(deviceAddress: deviceAddress, packageSHA256: sha)) ?? journal
                    if stopRequested || error.code == .stopped {
                        if error.code == .cancelled {
                            try? await store.remove(deviceAddress: deviceAddress, packageSHA256: sha)
                            throw CLIError("aborted: the device discarded the upload", exitCode: BledfuExit.interrupted)
                        }
                        throw CLIError("stopped at a safe point; continue with: \(resumeHint)", exitCode: BledfuExit.interrupted)
                    }
                    if partIndex < parts.count - 1, Self.isAlreadyPresent(error) {
                        progress.message("\(part.name): \(error.reason); skipping to the next part")
                        progress.count(skipped: true)
                        partIndex += 1
                        journal = DFUJournal(deviceAddress: deviceAddress, packageSHA256: sha, partIndex: partIndex)
                        continue
                    }
                    guard [.disconnected, .timeout, .transport, .executeUnconfirmed].contains(error.code) else {
                        throw CLIError("\(part.name): \(error.reason)", exitCode: FlashExit.code(for: error))
                    }
                    if error.code == .executeUnconfirmed {
                        unconfirmed = true  // Not a loss: the next connection only looks where the device is.
                        continue
                    }
                    lastLoss = error
                    guard budget.linkLost(progressed: (journal.executedOffset ?? -1) > before) else {
                        let why =
                            settings.reconnectAttempts == 0
                            ? "not reconnecting (--reconnect-attempts 0)"
                            : "no progress after \(settings.reconnectAttempts) reconnect episodes"
                        throw CLIError(
                            "\(part.name): \(error.reason) (\(why)); continue later with: \(resumeHint)",
                            exitCode: FlashExit.code(for: error))
                    }
                    progress.warning("\(part.name): \(error.reason); reconnecting")
                    continue
                }
            }
            progress.state("part-completed", ["part": partIndex + 1, "name": part.name])
            partIndex += 1
            budget = ReconnectBudget(policy: budget.policy)
            lastLoss = nil
            journal = DFUJournal(deviceAddress: deviceAddress, packageSHA256: sha, partIndex: partIndex)
            if partIndex < parts.count { try? await store.save(journal) }
            // The device resets into its bootloader or, after a system part, into the application (then jump).
            if !bootloader.addresses.contains(peer.address) { bootloader.addresses.append(peer.address) }
            if partIndex < parts.count { await pause(seconds: settings.rebootDelay) }
        }
        try? await store.remove(deviceAddress: deviceAddress, packageSHA256: sha)
        progress.state("completed", ["address": deviceAddress])
    }

    /// One engine run over one connection.
    private func runPart(_ part: DFUPart, index: Int, count: Int, link: OpenConnection, journal: DFUJournal, store: JournalFileStore)
        async throws(DFUEngineError) -> DFUJournal?
    {
        let transport: GATTDFUTransport
        do {
            transport = try await GATTDFUTransport.open(client: link.gatt)
        } catch {
            throw DFUEngineError(error.code == .disconnected ? .disconnected : .incompatible, error.reason)
        }
        let pacing: any PacingPolicy
        do {
            pacing = try PacingPolicies.parse(settings.pacing)
        } catch {
            throw DFUEngineError(.incompatible, error.description)
        }
        let configuration = SecureDFUConfiguration(
            pacing: pacing, checkpointTimeout: .milliseconds(Int64(settings.timeout * 1000)),
            abortOnCancel: settings.abortOnCancel)
        let driver = SecureDFUDriver(transport: transport, clock: ContinuousClock(), configuration: configuration, journalStore: store)
        let progress = self.progress
        let reporter = Task {
            for await report in driver.progress { progress.report(report) }
        }
        progress.state("uploading", ["part": index + 1, "parts": count, "name": part.name, "bytes": part.image.count])
        progress.beginRun(part: index, baseBytes: journal.partIndex == index ? journal.executedOffset ?? 0 : 0)
        currentDriver = driver
        // A Ctrl-C that came while connecting: stop at the first safe point of this run.
        if stopRequested, !settings.abortOnCancel { await driver.requestStop() }
        let task = Task { try await driver.run(part: part, partIndex: index, partCount: count, journal: journal) }
        runTask = task
        defer {
            currentDriver = nil
            runTask = nil
        }
        let result = await task.result
        await driver.finish()
        await reporter.value
        progress.endRun()
        switch result {
        case .success(let journal): return journal
        case .failure(let error as DFUEngineError): throw error
        case .failure(let error): throw DFUEngineError(.transport, "\(error)")
        }
    }

    static func isAlreadyPresent(_ error: DFUEngineError) -> Bool {
        guard error.code == .remote, case .extended(let ext)? = error.status else { return false }
        return ext == .firmwareAlreadyPresent || ext == .firmwareVersionFailure
    }

    /// Package parts in sending order (system first), as engine parts.
    static func selectParts(_ package: FirmwarePackage, scope: FlashScope) -> [DFUPart] {
        let ordered = package.parts.filter { $0.kind != .application } + package.parts.filter { $0.kind == .application }
        return ordered.filter { part in
            switch scope {
            case .all: true
            case .system: part.kind != .application
            case .application: part.kind == .application
            }
        }.map { DFUPart(name: $0.kind.rawValue, initPacket: $0.initPacketBytes, image: $0.image, firmwareVersion: $0.initCommand?.fwVersion) }
    }

    static func sha256(ofFile path: String) throws(CLIError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read \(path)", exitCode: BledfuExit.packageInvalid)
        }
        return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }
}

extension PackageCLI {
    static func loadForFlash(_ path: String) throws(CLIError) -> FirmwarePackage {
        do { return try load(path) } catch let error as CLIError { throw error } catch { throw CLIError("\(error)", exitCode: BledfuExit.packageInvalid) }
    }

    static func publicKeysForFlash(_ paths: [String]) throws(CLIError) -> [P256.Signing.PublicKey] {
        do {
            return try publicKeys(paths)
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(error)", exitCode: BledfuExit.packageInvalid)
        }
    }
}
