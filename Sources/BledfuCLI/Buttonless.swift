import BLECore
import DFUProtocol
import Foundation
import GATT
import PlatformIO
import SecureDFU

/// What a connected device offers on the Secure DFU service (FE59).
enum DFUMode: Equatable, Sendable {
    /// The bootloader: Control Point 8EC90001 and Packet 8EC90002.
    case bootloader
    /// The application with a buttonless characteristic (8EC90003 without bonds, 8EC90004 with bonds).
    case application(GATTCharacteristic, bonded: Bool)
}

/// Runs `body` with a deadline; nil when the deadline passed first (the body is cancelled).
func withDeadline<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Sleeps for `seconds` (a CLI delay, not a test).
func pause(seconds: Double) async {
    guard seconds > 0 else { return }
    try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
}

extension FlashSession {
    /// Connects to `peer`, wraps the bearer for `--capture`/`--verbose` (one capture file across reconnects), and
    /// exchanges the MTU.
    func connect(_ peer: PeerAddress) async throws(CLIError) -> OpenConnection {
        var options = ConnectOptions(timeout: .milliseconds(Int64(settings.timeout * 1000)))
        options.securityLevel = settings.security
        let (connection, writer) = try await connectATT(
            adapter: adapter, peer: peer, options: options, capturePath: settings.capture, capture: capture,
            verbose: settings.verbose)
        capture = writer
        return connection
    }

    /// Finds FE59 and tells bootloader from application.
    func detectMode(_ connection: OpenConnection) async throws(CLIError) -> DFUMode {
        do {
            guard let service = try await connection.gatt.discoverPrimaryServices(uuid: SecureDFUUUID.service).first else {
                throw CLIError("the device has no Secure DFU service (FE59)", exitCode: FlashExit.noDFUService)
            }
            let characteristics = try await connection.gatt.discoverCharacteristics(of: service)
            let uuids = Set(characteristics.map(\.uuid))
            if uuids.contains(SecureDFUUUID.controlPoint) && uuids.contains(SecureDFUUUID.packet) { return .bootloader }
            if var buttonless = characteristics.first(where: { $0.uuid == SecureDFUUUID.buttonlessWithoutBonds }) {
                buttonless.descriptors = try await connection.gatt.discoverDescriptors(of: buttonless)
                return .application(buttonless, bonded: false)
            }
            if var buttonless = characteristics.first(where: { $0.uuid == SecureDFUUUID.buttonlessWithBonds }) {
                buttonless.descriptors = try await connection.gatt.discoverDescriptors(of: buttonless)
                return .application(buttonless, bonded: true)
            }
            throw CLIError(
                "the device's FE59 service has neither a DFU Control Point nor a buttonless characteristic",
                exitCode: FlashExit.noDFUService)
        } catch let error as CLIError {
            throw error
        } catch let error as ATTClientError {
            throw CLIError(error)
        } catch {
            throw CLIError("\(error)", exitCode: BledfuExit.failure)
        }
    }

    /// The buttonless jump (anchors 2.8, 3.7): indications on, optional advertising name, `01`, wait for `20 01 01`
    /// and the disconnect. Returns where the bootloader will advertise.
    func jumpToBootloader(_ connection: OpenConnection, characteristic: GATTCharacteristic, bonded: Bool, address: BluetoothAddress)
        async throws(CLIError) -> BootloaderTarget
    {
        let gatt = connection.gatt
        let handle = characteristic.valueHandle
        let inbox = ButtonlessInbox()
        let forwarder = Task {
            for await notification in gatt.notifications where notification.handle == handle {
                if let response = try? ButtonlessResponse(decoding: notification.value) { await inbox.add(response) }
            }
        }
        defer { forwarder.cancel() }
        var name = bonded ? nil : settings.bootloaderName
        do {
            try await gatt.setIndications(true, of: characteristic)
            if let requested = name {
                try await gatt.write(handle: handle, value: ButtonlessRequest.setAdvertisementName(requested).encoded)
                let reply = await inbox.wait(opcode: 0x02, seconds: 5)
                if reply?.status != .success {
                    progress.warning("the device did not accept the bootloader name '\(requested)' (\(reply.map { "\($0.status)" } ?? "no answer")); looking for it at its address")
                    name = nil
                }
            }
            progress.state("jumping", ["address": address.description, "bonded": bonded])
            do {
                try await gatt.write(handle: handle, value: ButtonlessRequest.enterBootloader.encoded)
            } catch where error.code == .disconnected || error.code == .closed {
                // The device may reset before it answers.
            }
        } catch {
            throw CLIError("buttonless jump failed: \(error)", exitCode: FlashExit.remoteError)
        }
        if let reply = await inbox.wait(opcode: 0x01, seconds: 5), reply.status != .success {
            throw CLIError("the device refused to enter the bootloader: \(reply.status)", exitCode: FlashExit.remoteError)
        }
        let att = connection.att
        if await withDeadline(seconds: 5, { _ = await att.disconnected() }) == nil {
            progress.warning("the device did not disconnect after the jump; closing the link")
        }
        await att.close()
        return BootloaderTarget(
            addresses: bonded ? [address] : [address.nordicBootloaderAddress], name: name, type: settings.addressType)
    }

    /// Scans for the bootloader (by name or address) for up to `--scan-timeout` and connects to it. Falls back to
    /// connecting to the addresses directly when scanning fails.
    func findAndConnect(_ target: BootloaderTarget, exitCode: Int32) async throws(CLIError) -> (OpenConnection, PeerAddress) {
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(Int64(settings.scanTimeout * 1000)))
        var lastError: CLIError?
        var seen: [String] = []  // what did advertise meanwhile, for the message when the bootloader is not found
        while ContinuousClock.now < deadline {
            var found: PeerAddress?
            do {
                let remaining = ContinuousClock.now.duration(to: deadline)
                for try await advertisement in adapter.scan(filter: ScanFilter(), duration: remaining) {
                    let name = advertisement.parsed.name
                    let label = advertisement.peer.address.description + (name.map { " (\($0))" } ?? "")
                    if !seen.contains(label) { seen.append(label) }
                    let byName = target.name != nil && name == target.name
                    if byName || target.addresses.contains(advertisement.peer.address) {
                        found = advertisement.peer
                        progress.state(
                            "found",
                            ["address": advertisement.peer.address.description, "name": name ?? "", "by": byName ? "name" : "address"])
                        break
                    }
                }
            } catch {
                // Scanning may need privileges the connection does not: try the addresses themselves.
                lastError = CLIError("scanning failed: \(error)", exitCode: exitCode)
                for address in target.addresses {
                    if let connection = try? await connect(PeerAddress(address, type: target.type)) {
                        return (connection, PeerAddress(address, type: target.type))
                    }
                }
                await pause(seconds: 0.25)
                continue
            }
            guard let peer = found else { break }
            do {
                return (try await connect(peer), peer)
            } catch {
                lastError = error
                await pause(seconds: 0.25)
            }
        }
        let what = ([target.name].compactMap { $0 } + target.addresses.map(\.description)).joined(separator: " or ")
        let others = seen.isEmpty ? "nothing advertised" : "advertising meanwhile: " + seen.joined(separator: ", ")
        throw CLIError(
            "no DFU bootloader found (\(what)) within \(settings.scanTimeout) s (\(others))"
                + (lastError.map { ": \($0.message)" } ?? ""),
            exitCode: exitCode)
    }
}

/// Where to look for a bootloader.
struct BootloaderTarget: Sendable {
    var addresses: [BluetoothAddress]
    var name: String?
    var type: AddressType
}

/// Buttonless responses (`20 <op> <status>`) as they arrive.
actor ButtonlessInbox {
    private var responses: [ButtonlessResponse] = []

    func add(_ response: ButtonlessResponse) { responses.append(response) }

    func take(opcode: UInt8) -> ButtonlessResponse? {
        guard let index = responses.firstIndex(where: { $0.requestOpcode == opcode }) else { return nil }
        return responses.remove(at: index)
    }

    /// The first response to `opcode`, waiting up to `seconds`.
    nonisolated func wait(opcode: UInt8, seconds: Double) async -> ButtonlessResponse? {
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
        while ContinuousClock.now < deadline {
            if let response = await take(opcode: opcode) { return response }
            await pause(seconds: 0.02)
        }
        return nil
    }
}

extension FlashSession {
    /// `--name`: the first device whose advertised name starts with `name`.
    func findAndConnectByName(_ name: String) async throws(CLIError) -> PeerAddress {
        do {
            let duration = Duration.milliseconds(Int64(settings.scanTimeout * 1000))
            for try await advertisement in adapter.scan(filter: ScanFilter(namePrefix: name), duration: duration) {
                return advertisement.peer
            }
        } catch let error as AdapterError {
            throw CLIError(error)
        } catch {
            throw CLIError("scan failed: \(error)", exitCode: BledfuExit.failure)
        }
        throw CLIError("no device named '\(name)…' found within \(settings.scanTimeout) s", exitCode: BledfuExit.deviceNotFound)
    }

    /// Connects (to `initial`, else to whatever `target` finds) and makes sure the link ends at the bootloader:
    /// from application mode it does the buttonless jump and finds the bootloader. Updates `target` to where the
    /// bootloader was found.
    func openBootloader(initial: PeerAddress?, target: inout BootloaderTarget) async throws(CLIError) -> OpenConnection {
        var connection: OpenConnection
        var peer: PeerAddress
        if let initial {
            connection = try await connect(initial)
            peer = initial
        } else {
            (connection, peer) = try await findAndConnect(target, exitCode: FlashExit.bootloaderNotFound)
        }
        for _ in 0..<3 {
            let mode: DFUMode
            do {
                mode = try await detectMode(connection)
            } catch {
                await connection.att.close()
                throw error
            }
            switch mode {
            case .bootloader:
                target.addresses = [peer.address]
                progress.state("bootloader", ["address": peer.address.description])
                return connection
            case .application(let characteristic, let bonded):
                progress.state("application-mode", ["address": peer.address.description, "bonded": bonded])
                target = try await jumpToBootloader(connection, characteristic: characteristic, bonded: bonded, address: peer.address)
                await pause(seconds: settings.rebootDelay)
                (connection, peer) = try await findAndConnect(target, exitCode: FlashExit.bootloaderNotFound)
            }
        }
        await connection.att.close()
        throw CLIError("the device keeps coming back in application mode", exitCode: FlashExit.bootloaderNotFound)
    }

    /// After a last Execute that went unacknowledged: finds the device at its bootloader or application address.
    /// Returns nil when it runs its application (the Execute took effect: a bootloader with an unfinished update
    /// stays in DFU mode), else the bootloader connection to resume on.
    func confirmExecute(_ target: inout BootloaderTarget, appAddress: BluetoothAddress) async throws(CLIError) -> OpenConnection? {
        await pause(seconds: settings.rebootDelay)
        var either = target
        if !either.addresses.contains(appAddress) { either.addresses.append(appAddress) }
        let (connection, peer) = try await findAndConnect(either, exitCode: FlashExit.linkLost)
        let mode: DFUMode
        do {
            mode = try await detectMode(connection)
        } catch {
            await connection.att.close()
            throw error
        }
        if case .application = mode {
            await connection.att.close()
            return nil
        }
        target.addresses = [peer.address]
        progress.state("bootloader", ["address": peer.address.description])
        return connection
    }

    /// Connects to the bootloader again. After a lost link (`loss`) this is one disconnect episode of the
    /// ``ReconnectPolicy``: up to `--reconnect-attempts` attempts with backoff (0.5, 1, 2, 4, 8 s); between parts
    /// (`loss` nil) one attempt, which scans for up to `--scan-timeout`.
    func reconnect(_ target: inout BootloaderTarget, after loss: DFUEngineError?) async throws(CLIError) -> OpenConnection {
        let policy = ReconnectPolicy(attempts: settings.reconnectAttempts)
        var last: CLIError?
        for attempt in 0..<(loss == nil ? 1 : policy.attempts) {
            if loss != nil {
                let delay = policy.delay(beforeAttempt: attempt)
                progress.state("reconnecting", ["attempt": attempt + 1, "of": policy.attempts, "delayMs": Int(delay / .milliseconds(1))])
                // The backoff in slices, so that a Ctrl-C during it stops at once.
                var waited = Duration.zero
                while waited < delay, !stopRequested {
                    await pause(seconds: 0.05)
                    waited += .milliseconds(50)
                }
                progress.count(reconnect: true)
            }
            if stopRequested { throw CLIError("stopped; continue with: \(resumeHint)", exitCode: BledfuExit.interrupted) }
            do {
                return try await openBootloader(initial: nil, target: &target)
            } catch {
                if error.exitCode == FlashExit.noDFUService || error.exitCode == FlashExit.remoteError { throw error }
                last = error
                if loss == nil { break }
            }
        }
        guard let loss else {
            throw last ?? CLIError("bootloader not found", exitCode: FlashExit.bootloaderNotFound)
        }
        throw CLIError(
            "\(loss.reason); reconnecting failed (\(last?.message ?? "no answer")); continue later with: \(resumeHint)",
            exitCode: FlashExit.code(for: loss))
    }
}
