import BLECore
import DFUSimulator
import Foundation
import Logging
import PlatformIO
import Synchronization

/// Runs virtual devices on a virtual radio directory or a BlueZ adapter (`bledfu simulate`): per device, an
/// endpoint advertising the device's current advertisement, one connection at a time served by
/// `VirtualDevice.serve`, re-advertising after each connection and moving to the new address when it changes
/// (buttonless jump, end of an update).
///
/// ``stop()`` may be called from any thread (a signal handler's queue): it closes every endpoint (on a virtual radio
/// removing its `.sock` and `.adv` files) and every open connection, which ends the device loops.
final class SimulatorHost: Sendable {
    struct Running: Sendable {
        var device: any HostedDevice
        var spec: SimulatedDeviceSpec
        var reporter: StatusReporter
        var endpoint: any SimulatorEndpoint
    }

    private struct Shared {
        var stopping = false
        var endpoints: [BluetoothAddress: any SimulatorEndpoint] = [:]
        var connections: [BluetoothAddress: SocketBearer] = [:]
    }

    /// Where the devices are served, for messages ("virtual:/tmp/radio", "hci1").
    let place: String
    let events: SimulatorEvents
    private let makeEndpoint: @Sendable () throws(CLIError) -> any SimulatorEndpoint
    private let shared = Mutex(Shared())

    /// Devices on a virtual radio directory.
    convenience init(radioDirectory: String, events: SimulatorEvents) {
        self.init(place: "virtual:" + radioDirectory, events: events) { VirtualSimulatorEndpoint(radioDirectory: radioDirectory) }
    }

    init(place: String, events: SimulatorEvents, makeEndpoint: @escaping @Sendable () throws(CLIError) -> any SimulatorEndpoint) {
        self.place = place
        self.events = events
        self.makeEndpoint = makeEndpoint
    }

    var isStopping: Bool { shared.withLock { $0.stopping } }

    /// Makes the devices and their first endpoints; throws (and closes what it opened) when one cannot advertise.
    func start(_ specs: [SimulatedDeviceSpec], statusDirectory: String, stateDirectory: String?) async throws
        -> [Running]
    {
        var running: [Running] = []
        do {
            try makeDirectory(statusDirectory)
            if let stateDirectory { try makeDirectory(stateDirectory) }
            for spec in specs {
                let reporter = StatusReporter(
                    spec: spec, statusDirectory: statusDirectory, stateDirectory: stateDirectory, events: events)
                let device = await makeDevice(spec, reporter: reporter, stateDirectory: stateDirectory)
                let endpoint = try register(try makeEndpoint(), identity: spec.identity)
                let advertisement = await device.currentAdvertisement
                try await endpoint.advertise(advertisement)
                emitAdvertising(advertisement)
                running.append(Running(device: device, spec: spec, reporter: reporter, endpoint: endpoint))
            }
        } catch {
            // Not `stop()`: the caller tells a failed start from a signal by `isStopping`.
            closeAll(stopping: false)
            throw error
        }
        return running
    }

    /// The device of `spec` (Secure DFU, Legacy DFU or SMP), restored from the state directory, with its first status
    /// written.
    private func makeDevice(_ spec: SimulatedDeviceSpec, reporter: StatusReporter, stateDirectory: String?) async
        -> any HostedDevice
    {
        let logger = Logger(label: "bledfu.simulator.\(spec.name)")
        switch spec.device {
        case .secure(let profile):
            let restoring = stateDirectory.flatMap { SimulatorFiles.loadPersistentState(spec.identity, from: $0) }
            let persistentSink: (@Sendable (DevicePersistentState) async -> Void)? =
                stateDirectory == nil ? nil : { @Sendable state in reporter.persist(state) }
            let device = VirtualDevice(
                profile: profile, faults: spec.faults, clock: ContinuousClock(),
                statusSink: { state in reporter.publish(state) }, restoring: restoring, persistentSink: persistentSink,
                logger: logger)
            if stateDirectory != nil { reporter.persist(await device.persistentState()) }
            reporter.publish(await device.state())
            return device
        case .legacy(let profile):
            let restoring = stateDirectory.flatMap { SimulatorFiles.loadLegacyPersistentState(spec.identity, from: $0) }
            let persistentSink: (@Sendable (LegacyPersistentState) async -> Void)? =
                stateDirectory == nil ? nil : { @Sendable state in reporter.persist(state) }
            let device = VirtualLegacyDevice(
                profile: profile, faults: spec.faults, clock: ContinuousClock(),
                statusSink: { state in reporter.publish(state) }, restoring: restoring, persistentSink: persistentSink,
                logger: logger)
            if stateDirectory != nil { reporter.persist(await device.persistentState()) }
            reporter.publish(await device.state())
            return device
        case .smp(let profile):
            return await SMPSimulator.makeDevice(profile, faults: spec.faults, reporter: reporter, stateDirectory: stateDirectory)
        }
    }

    /// Serves every device until ``stop()``; returns the first error that ended a device (nil on a clean stop).
    func run(_ devices: [Running]) async -> CLIError? {
        await withTaskGroup(of: CLIError?.self) { group in
            for device in devices {
                group.addTask { await self.serve(device) }
            }
            var first: CLIError?
            for await result in group {
                if let result, first == nil {
                    first = result
                    stop()
                }
            }
            return first
        }
    }

    /// Closes every endpoint and connection (idempotent).
    func stop() {
        closeAll(stopping: true)
    }

    private func closeAll(stopping: Bool) {
        let (endpoints, connections) = shared.withLock { state in
            if stopping { state.stopping = true }
            defer {
                state.endpoints = [:]
                state.connections = [:]
            }
            return (Array(state.endpoints.values), Array(state.connections.values))
        }
        for endpoint in endpoints { endpoint.close() }
        for connection in connections { connection.closeNow() }
    }

    // MARK: One device

    private func serve(_ running: Running) async -> CLIError? {
        let result = await serveConnections(running)
        await running.endpoint.shutdown()
        return result
    }

    private func serveConnections(_ running: Running) async -> CLIError? {
        let device = running.device
        let endpoint = running.endpoint
        var advertised = await device.currentAdvertisement.peer.address
        var first = true
        while !isStopping {
            let advertisement = await device.currentAdvertisement
            if !first {
                do throws(CLIError) {
                    try await endpoint.advertise(advertisement)
                } catch {
                    return isStopping ? nil : error
                }
                if advertisement.peer.address != advertised {
                    advertised = advertisement.peer.address
                    emitAdvertising(advertisement)
                }
            }
            first = false
            let bearer: SocketBearer
            do {
                bearer = try await endpoint.accept()
            } catch {
                if isStopping || error.code == .closed { return nil }
                return CLIError("\(running.spec.name): accept failed: \(error)", exitCode: BledfuExit.failure)
            }
            let identity = running.spec.identity
            let admitted = shared.withLock { state -> Bool in
                guard !state.stopping else { return false }
                state.connections[identity] = bearer
                return true
            }
            guard admitted else {
                bearer.closeNow()
                return nil
            }
            // Which process connected (SO_PEERCRED) and its parent: the line's tests prove from these lines that no
            // two stations updated one device at once.
            let peer = PeerProcess(bearer)
            await endpoint.connected()
            events.emit("connected", device: running.spec, address: advertisement.peer.address, peer: peer)
            await device.serve(endpoint.link(bearer))
            await endpoint.linkEnded(bearer)
            _ = shared.withLock { $0.connections.removeValue(forKey: identity) }
            events.emit("disconnected", device: running.spec, address: advertisement.peer.address, peer: peer)
        }
        return nil
    }

    /// Registers `endpoint` for ``stop()``; closes it and throws when stopping already.
    private func register(_ endpoint: any SimulatorEndpoint, identity: BluetoothAddress) throws(CLIError)
        -> any SimulatorEndpoint
    {
        let registered = shared.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.endpoints[identity] = endpoint
            return true
        }
        guard registered else {
            endpoint.close()
            throw CLIError("stopping", exitCode: BledfuExit.success)
        }
        return endpoint
    }

    private func emitAdvertising(_ advertisement: Advertisement) {
        events.emit(
            "advertising", device: nil, address: advertisement.peer.address, name: advertisement.parsed.name ?? "")
    }

    private func makeDirectory(_ path: String) throws(CLIError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw CLIError("cannot create \(path): \(error.localizedDescription)", exitCode: BledfuExit.failure)
        }
    }
}

/// Lines the simulator prints: text on standard error, or NDJSON on standard output with `--json`.
struct SimulatorEvents: Sendable {
    var json: Bool

    func emit(_ event: String, device: SimulatedDeviceSpec?, address: BluetoothAddress, name: String? = nil, peer: PeerProcess? = nil) {
        let label = name ?? device?.name ?? ""
        if json {
            var object: [String: any Sendable] = ["event": event, "address": address.description, "name": label]
            if let device { object["identity"] = device.identity.description }
            if let peer {
                object["pid"] = Int(peer.pid)
                if let parent = peer.parent { object["parent_pid"] = Int(parent) }
                object["at_us"] = Int(system_realtimeMicroseconds())
            }
            Console.json(object)
        } else {
            let who = peer.map { " (pid \($0.pid)\($0.parent.map { ", parent \($0)" } ?? ""))" } ?? ""
            Console.errorRaw("bledfu simulate: \(label) \(address) \(event)\(who)")
        }
    }

    func fault(_ record: FaultRecord, device: SimulatedDeviceSpec, address: String) {
        if json {
            Console.json([
                "event": "fault", "name": device.name, "address": address, "kind": record.kind,
                "trigger": record.trigger, "bytes_received": Int(clamping: record.bytesReceived),
                "at_ms": record.atMilliseconds,
            ])
        } else {
            Console.errorRaw("bledfu simulate: \(device.name) \(address) fault \(record)")
        }
    }

    /// An SMP device's fault (its counters' text: "disconnect after 8192 bytes", "lie:wrong-rc").
    func fault(_ text: String, device: SimulatedDeviceSpec, address: String) {
        if json {
            Console.json(["event": "fault", "name": device.name, "address": address, "kind": text])
        } else {
            Console.errorRaw("bledfu simulate: \(device.name) \(address) fault \(text)")
        }
    }

    func failure(_ message: String) {
        Console.warning(message)
    }
}

/// Writes a device's `DeviceState` to its status file (and state file) on every change, atomically, and logs the
/// faults that fired since the previous snapshot.
final class StatusReporter: Sendable {
    let spec: SimulatedDeviceSpec
    let paths: [String]
    /// `STATE_DIR/<identity>.state.json` (with `--state-dir`).
    let persistentPath: String?
    let events: SimulatorEvents
    private let reported = Mutex((faults: 0, lastError: ""))

    init(spec: SimulatedDeviceSpec, statusDirectory: String, stateDirectory: String?, events: SimulatorEvents) {
        self.spec = spec
        let name = SimulatorFiles.stateName(spec.identity)
        self.paths = [statusDirectory + "/" + name] + (stateDirectory.map { [$0 + "/" + name] } ?? [])
        self.persistentPath = stateDirectory.map { $0 + "/" + SimulatorFiles.persistentStateName(spec.identity) }
        self.events = events
    }

    /// Writes the device's flash and settings snapshot to its state file, atomically.
    func persist(_ state: some Encodable) {
        guard let persistentPath else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(state) else { return }
        write(data, to: persistentPath)
    }

    func publish(_ state: DeviceState) { publish(state, faults: state.faults, address: state.address) }

    func publish(_ state: LegacyDeviceState) { publish(state, faults: state.faults, address: state.address) }

    /// An SMP device's status; the faults that fired since the last one are printed (their text).
    func publish(_ state: SMPDeviceState) {
        let newFaults = reported.withLock { reported -> ArraySlice<String> in
            let fresh = state.counters.faults.dropFirst(min(reported.faults, state.counters.faults.count))
            reported.faults = state.counters.faults.count
            return fresh
        }
        for fault in newFaults { events.fault(fault, device: spec, address: state.address) }
        write(state)
    }

    /// Logs the faults that fired since the last snapshot and writes the status files.
    func publish(_ state: some Encodable, faults: [FaultRecord], address: String) {
        let newFaults = reported.withLock { reported -> ArraySlice<FaultRecord> in
            let fresh = faults.dropFirst(min(reported.faults, faults.count))
            reported.faults = faults.count
            return fresh
        }
        for record in newFaults { events.fault(record, device: spec, address: address) }
        write(state)
    }

    /// Writes a status snapshot to the status files.
    private func write(_ state: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(state) else { return }
        for path in paths { write(data, to: path) }
    }

    /// Temporary file + rename; a failure is reported once until the message changes.
    private func write(_ data: Data, to path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let temporary = directory + "/." + (path as NSString).lastPathComponent + ".tmp"
        do {
            try FileIO.writeAtomically(path, Array(data), temporaryPath: temporary)
        } catch {
            let message = "cannot write status file \(path): \(error)"
            let repeated = reported.withLock { reported -> Bool in
                defer { reported.lastError = message }
                return reported.lastError == message
            }
            if !repeated { events.failure(message) }
        }
    }
}

/// The process at the other end of a virtual link (SO_PEERCRED) and its parent (from /proc/PID/stat, read while the
/// connecting process runs).
struct PeerProcess: Sendable {
    var pid: Int32
    var parent: Int32?

    init?(_ bearer: SocketBearer) {
        guard let pid = try? bearer.socket?.peerProcessID(), pid > 0 else { return nil }
        self.pid = pid
        // Field 4 of /proc/PID/stat, after the command name in parentheses (which may hold spaces).
        let stat = FileManager.default.contents(atPath: "/proc/\(pid)/stat").map { String(decoding: $0, as: UTF8.self) } ?? ""
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        parent = fields.count > 1 ? Int32(fields[1]) : nil
    }
}
