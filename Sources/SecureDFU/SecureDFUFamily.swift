import BLECore
import DFUCore
import DFUPackage
import DFUProtocol
import GATT

/// Secure DFU (nRF5 SDK ≥ 12) as a ``DFUFamily``: the first family of the updater. Detection, the buttonless jump
/// and planning live here (and in `SecureDFUFamily+Buttonless.swift`); a part goes through ``SecureDFUDriver``
/// over ``GATTDFUTransport``, unchanged.
///
/// - Detect: service FE59 with Control Point 8EC90001 and Packet 8EC90002 is the bootloader, ready on this link;
///   FE59 with a buttonless characteristic (8EC90003 without bonds, 8EC90004 with bonds) is the application
///   (secure-dfu-anchors.md 2.8); FE59 with neither is an application without a way in.
/// - Plan: a Secure package (protobuf init packets); a Legacy package (nrfutil 0.5, `dfu_version`) is refused.
/// - Resume: the journal keeps the executed objects of the part (``SecureResume``); the driver resumes from them
///   and from Select/CRC (``DFUPlanning``).
/// - After a part the device resets: into its bootloader for the next part, or into the application.
public struct SecureDFUFamily: DFUFamily {
    public typealias Part = DFUPart
    public typealias Resume = SecureResume

    /// What the jump needs: the buttonless characteristic (descriptors discovered).
    public struct Entry: Sendable, Hashable {
        public var characteristic: GATTCharacteristic
        /// 8EC90004: the bootloader keeps the application's address and takes no name.
        public var bonded: Bool
    }

    public var id: DFUFamilyID { .secure }
    public var displayName: String { "Secure DFU" }
    public var advertisedServices: [BluetoothUUID] { [SecureDFUUUID.service] }
    /// `flash --service-uuid`: a device whose vendor moved the DFU service.
    public var optionSettings: [String: String] { ["service-uuid": "secure.service"] }

    /// The UUIDs of the device: ``SecureDFUUUIDs/standard`` unless the options' settings `secure.service`,
    /// `secure.control-point`, `secure.packet`, `secure.buttonless` or `secure.buttonless-bonded` move them. A
    /// setting that is no UUID is an ``DFUError/Code/invalidOption``.
    public static func uuids(_ options: UpdateOptions) throws(DFUError) -> SecureDFUUUIDs {
        func uuid(_ key: String, _ standard: BluetoothUUID) throws(DFUError) -> BluetoothUUID {
            guard let text = options.settings[key] else { return standard }
            guard let uuid = BluetoothUUID(text) else {
                throw DFUError(
                    .invalidOption, "\(key)=\(text) is not a UUID (FE59, or 8EC90001-F315-4F60-9FB8-838830DAEA50)",
                    family: .secure)
            }
            return uuid
        }
        let standard = SecureDFUUUIDs.standard
        return SecureDFUUUIDs(
            service: try uuid("secure.service", standard.service),
            controlPoint: try uuid("secure.control-point", standard.controlPoint),
            packet: try uuid("secure.packet", standard.packet),
            buttonlessWithoutBonds: try uuid("secure.buttonless", standard.buttonlessWithoutBonds),
            buttonlessWithBonds: try uuid("secure.buttonless-bonded", standard.buttonlessWithBonds))
    }

    public init() {}

    // MARK: Plan

    public func plan(_ package: PackageSource, options: UpdateOptions) throws(DFUError) -> FamilyPlan<DFUPart> {
        // A zip starts with a local file header "PK\3\4" (APPNOTE 4.3.7); anything else is another family's image.
        guard package.bytes.starts(with: [0x50, 0x4B, 0x03, 0x04]) else {
            throw DFUError(
                .incompatiblePackage, "\(package.fileName) is not a zip archive, not a Secure DFU package", family: id)
        }
        let firmware: FirmwarePackage
        do {
            firmware = try FirmwarePackage(bytes: package.bytes)
        } catch {
            throw DFUError(.invalidPackage, error.message, cause: error, family: id)
        }
        if firmware.format == .legacy {
            let version = firmware.manifest.dfuVersion.map { " (dfu_version \($0))" } ?? ""
            throw DFUError(
                .incompatiblePackage, "\(package.fileName) is a Legacy DFU package\(version), not a Secure DFU package",
                family: id)
        }
        let report: VerificationReport
        do {
            report = try firmware.verify(pemKeys: options.verificationKeys)
        } catch {
            throw DFUError(.invalidPackage, error.message, cause: error, family: id)
        }
        if let first = report.errors.first {
            throw DFUError(.invalidPackage, first.message, cause: first, family: id)
        }
        let parts = Self.parts(of: firmware, scope: options.scope)
        guard !parts.isEmpty else {
            throw DFUError(.invalidPackage, "the package has no \(options.scope) part", family: id)
        }
        // The package is ours: now the options must be too (a `--mode` of another family is refused here).
        do {
            _ = try PacingPolicies.parse(options.pacing)
        } catch {
            throw DFUError(.invalidOption, "--mode \(options.pacing) is not a Secure DFU mode: \(error)", family: id)
        }
        _ = try Self.uuids(options)
        return FamilyPlan(
            family: id, parts: parts, warnings: firmware.warnings + report.warnings,
            targetVersion: firmware.part(.application)?.initCommand?.fwVersion)
    }

    /// Package parts in sending order (system first), as engine parts.
    public static func parts(of package: FirmwarePackage, scope: PartScope) -> [DFUPart] {
        let ordered = package.parts.filter { $0.kind != .application } + package.parts.filter { $0.kind == .application }
        return ordered.filter { part in
            switch scope {
            case .all: true
            case .system: part.kind != .application
            case .application: part.kind == .application
            }
        }.map(DFUPart.init)
    }

    // MARK: Detect

    public func detect(_ services: [GATTService], on link: DFULink, context: UpdateContext) async throws(DFUError)
        -> Detection<Entry>?
    {
        let dfu = try Self.uuids(context.options)
        guard let service = services.first(where: { $0.uuid == dfu.service }) else { return nil }
        do {
            let characteristics = try await link.gatt.discoverCharacteristics(of: service)
            let uuids = Set(characteristics.map(\.uuid))
            if uuids.contains(dfu.controlPoint) && uuids.contains(dfu.packet) {
                return .updater(description: "Secure DFU bootloader")
            }
            for (uuid, bonded) in [(dfu.buttonlessWithoutBonds, false), (dfu.buttonlessWithBonds, true)] {
                guard var buttonless = characteristics.first(where: { $0.uuid == uuid }) else { continue }
                buttonless.descriptors = try await link.gatt.discoverDescriptors(of: buttonless)
                return .application(
                    Entry(characteristic: buttonless, bonded: bonded),
                    description: "Secure DFU buttonless" + (bonded ? " (bonded)" : ""), bonded: bonded)
            }
            return .applicationWithoutEntry(
                reason: "the device's FE59 service has neither a DFU Control Point nor a buttonless characteristic")
        } catch {
            throw Self.map(error, doing: "discovering the Secure DFU service")
        }
    }

    public func updaterLocation(forApplicationAt peer: PeerAddress, options: UpdateOptions) -> DeviceLocation? {
        DeviceLocation(
            addresses: [peer.address.nordicBootloaderAddress], names: options.bootloaderName.map { [$0] } ?? [],
            addressType: peer.type)
    }

    // MARK: Upload

    public func upload(_ part: DFUPart, on link: DFULink, context: PartContext<SecureResume>) async throws(DFUError)
        -> PartOutcome
    {
        let options = context.update.options
        let uuids = try Self.uuids(options)
        let transport: GATTDFUTransport
        do {
            transport = try await GATTDFUTransport.open(client: link.gatt, uuids: uuids)
        } catch {
            throw DFUError(
                error.code == .disconnected ? .linkLost : .noUpdateService, error.reason, cause: error, family: id)
        }
        let pacing: any PacingPolicy
        do {
            pacing = try PacingPolicies.parse(options.pacing)
        } catch {
            throw DFUError(.invalidOption, "--mode \(options.pacing) is not a Secure DFU mode: \(error)", family: id)
        }
        let configuration = SecureDFUConfiguration(
            pacing: pacing, checkpointTimeout: options.responseTimeout, abortOnCancel: options.abortOnCancel)
        let driver = SecureDFUDriver(
            transport: transport, clock: context.update.clock, configuration: configuration,
            checkpoint: { journal in
                await context.checkpoint(SecureResume(executed: journal.executed), confirmedBytes: journal.executedOffset ?? 0)
            }, logger: context.update.logger)
        let reporter = Task {
            for await report in driver.progress {
                let p = report.progress
                context.progress(
                    PartProgress(
                        bytesConfirmed: p.bytesConfirmed, totalBytes: p.totalBytes, objectIndex: p.objectIndex,
                        objectCount: p.objectCount, retries: p.retries, bytesResent: p.bytesResent))
            }
        }
        // A stop requested before this run (while connecting) stops at its first safe point.
        let stop = context.update.stop.onRequest { Task { await driver.requestStop() } }
        let journal = DFUJournal(
            deviceAddress: link.peer.address.description, packageSHA256: "", partIndex: context.index,
            executed: context.resume?.executed ?? [])
        let result: Result<Void, DFUEngineError>
        do {
            try await driver.run(part: part, partIndex: context.index, partCount: context.count, journal: journal)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        stop.cancel()
        await driver.finish()
        await reporter.value
        if case .failure(let error) = result { throw Self.map(error) }
        // The device resets: into its bootloader for the next part (same address), or into the application.
        return .resets(DeviceLocation(link.peer))
    }

    /// The engine's error in the family vocabulary (the engine's error stays the cause).
    public static func map(_ error: DFUEngineError) -> DFUError {
        let code: DFUError.Code
        switch error.code {
        case .remote:
            if case .extended(let ext)? = error.status, ext == .firmwareAlreadyPresent || ext == .firmwareVersionFailure {
                code = .alreadyPresent
            } else {
                code = .remoteRefusal
            }
        case .crcMismatch, .bytesLost, .gaveUp: code = .verificationFailed
        case .timeout: code = .timeout
        case .disconnected: code = .linkLost
        case .transport: code = .transport
        case .executeUnconfirmed: code = .unconfirmed
        case .cancelled: code = .cancelled
        case .stopped: code = .stopped
        case .incompatible: code = .incompatiblePackage
        default: code = .protocolViolation
        }
        return DFUError(code, error.reason, cause: error, family: .secure)
    }

    static func map(_ error: ATTClientError, doing what: String) -> DFUError {
        switch error.code {
        case .disconnected, .closed: DFUError(.linkLost, "the device disconnected while \(what): \(error)", cause: error, family: .secure)
        case .timeout: DFUError(.timeout, "no answer while \(what): \(error)", cause: error, family: .secure)
        default: DFUError(.protocolViolation, "\(what): \(error)", cause: error, family: .secure)
        }
    }
}

/// The journal state of a Secure DFU part: the objects the device executed (offset and CRC of each), which tell
/// executed data from data merely present (``DFUPlanning/dataResumeDecision``).
public struct SecureResume: Codable, Sendable, Hashable {
    public var executed: [DFUExecutedObject]
    public init(executed: [DFUExecutedObject]) { self.executed = executed }
}

extension DFUPart: UpdatePart {
    public var byteCount: Int { image.count }
    /// The init packet's `fw_version` of an application part.
    public var applicationVersion: UInt32? { name == "application" ? firmwareVersion : nil }
}
