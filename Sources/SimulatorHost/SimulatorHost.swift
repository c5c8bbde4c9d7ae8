import BLECore
import DFUSimulator
import Foundation
import Logging
import LinuxIO
import Synchronization
import VirtualRadio

/// One device to host: its identity (the key of its files), its name, and how to make it, given the reporter its
/// status and state go to (a ``HostedDevice``: the Secure DFU ``VirtualDevice``, or another family's).
public struct HostedDeviceEntry: Sendable {
    public var identity: BluetoothAddress
    public var name: String
    public var make: @Sendable (StatusReporter) async -> any HostedDevice

    public init(identity: BluetoothAddress, name: String, make: @escaping @Sendable (StatusReporter) async -> any HostedDevice) {
        self.identity = identity
        self.name = name
        self.make = make
    }
}

/// Why hosting failed.
public struct HostError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The peripheral could not advertise (the cause is the adapter's error).
        public static let advertise = Code(rawValue: "advertise")
        /// Accepting a connection failed.
        public static let accept = Code(rawValue: "accept")
        /// A status or state directory could not be made.
        public static let files = Code(rawValue: "files")
        /// The host is stopping.
        public static let stopping = Code(rawValue: "stopping")
        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String
    public var cause: (any Error)?

    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { message }
}

/// Where the host reports what happens (`bledfu simulate` prints it as text or NDJSON).
public protocol HostEvents: Sendable {
    /// `advertising`, `connected`, `disconnected`: `device` is the hosted device (its name and identity) when the
    /// event is about one; `peer` the connecting process on a local link.
    func emit(_ event: String, device: HostedDeviceEntry?, address: BluetoothAddress, name: String?, peer: PeerProcess?)
    /// A fault the device injected.
    func fault(_ record: FaultRecord, device: String, address: String)
    /// Something went wrong that does not stop the host (a status file that cannot be written).
    func failure(_ message: String)
}

/// File names of the host, by identity address.
public enum SimulatorHostFiles {
    /// "C6-05-04-03-02-01.json": a device's status or state file.
    public static func stateName(_ address: BluetoothAddress) -> String {
        address.description.replacingOccurrences(of: ":", with: "-") + ".json"
    }

    /// "C6-05-04-03-02-01.state.json": what survives a power cycle (`--state-dir`).
    public static func persistentStateName(_ address: BluetoothAddress) -> String {
        address.description.replacingOccurrences(of: ":", with: "-") + ".state.json"
    }
}

/// Runs virtual devices on a virtual radio directory or a BlueZ adapter (`bledfu simulate`): per device, a
/// ``BLEPeripheral`` advertising the device's current advertisement, one connection at a time served by
/// ``HostedDevice/serve(_:)``, re-advertising after each connection and moving to the new address when it changes
/// (buttonless jump, end of an update).
///
/// ``stop()`` may be called from any thread (a signal handler's queue): it closes every endpoint (on a virtual radio
/// removing its `.sock` and `.adv` files) and every open connection, which ends the device loops.
public final class SimulatorHost: Sendable {
    public struct Running: Sendable {
        public var device: any HostedDevice
        public var entry: HostedDeviceEntry
        public var reporter: StatusReporter
        public var endpoint: any BLEPeripheral
    }

    private struct Shared {
        var stopping = false
        var endpoints: [BluetoothAddress: any BLEPeripheral] = [:]
        var connections: [BluetoothAddress: PeripheralConnection] = [:]
    }

    /// Where the devices are served, for messages ("virtual:/tmp/radio", "hci1").
    public let place: String
    public let events: any HostEvents
    private let makeEndpoint: @Sendable () throws(AdapterError) -> any BLEPeripheral
    private let shared = Mutex(Shared())

    /// Devices on a virtual radio directory.
    public convenience init(radioDirectory: String, events: any HostEvents) {
        self.init(place: "virtual:" + radioDirectory, events: events) { VirtualRadioPeripheral(radioDirectory: radioDirectory) }
    }

    /// - Parameter makeEndpoint: one peripheral per device (a BlueZ adapter's, the virtual radio's).
    public init(
        place: String, events: any HostEvents, makeEndpoint: @escaping @Sendable () throws(AdapterError) -> any BLEPeripheral
    ) {
        self.place = place
        self.events = events
        self.makeEndpoint = makeEndpoint
    }

    public var isStopping: Bool { shared.withLock { $0.stopping } }

    /// Makes the devices and their first endpoints; throws (and closes what it opened) when one cannot advertise.
    public func start(_ entries: [HostedDeviceEntry], statusDirectory: String, stateDirectory: String?) async throws(HostError)
        -> [Running]
    {
        var running: [Running] = []
        do throws(HostError) {
            try makeDirectory(statusDirectory)
            if let stateDirectory { try makeDirectory(stateDirectory) }
            for entry in entries {
                let reporter = StatusReporter(
                    name: entry.name, identity: entry.identity, statusDirectory: statusDirectory,
                    stateDirectory: stateDirectory, events: events)
                let device = await entry.make(reporter)
                if stateDirectory != nil { reporter.persist(await device.persistentState()) }
                reporter.publish(await device.state())
                let endpoint: any BLEPeripheral
                do {
                    endpoint = try register(try makeEndpoint(), identity: entry.identity)
                } catch {
                    throw HostError(.advertise, error.reason, cause: error)
                }
                let advertisement = await device.currentAdvertisement
                do {
                    try await endpoint.advertise(advertisement)
                } catch {
                    throw HostError(.advertise, error.reason, cause: error)
                }
                emitAdvertising(advertisement)
                running.append(Running(device: device, entry: entry, reporter: reporter, endpoint: endpoint))
            }
        } catch {
            // Not `stop()`: the caller tells a failed start from a signal by `isStopping`.
            closeAll(stopping: false)
            throw error
        }
        return running
    }

    /// Serves every device until ``stop()``; returns the first error that ended a device (nil on a clean stop).
    public func run(_ devices: [Running]) async -> HostError? {
        await withTaskGroup(of: HostError?.self) { group in
            for device in devices {
                group.addTask { await self.serve(device) }
            }
            var first: HostError?
            for await result in group {
                if let result, first == nil {
                    first = result
                    stop()
                }
            }
            return first
        }
    }

    /// Closes every endpoint and connection (idempotent, from any thread).
    public func stop() {
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

    private func serve(_ running: Running) async -> HostError? {
        let result = await serveConnections(running)
        await running.endpoint.shutdown()
        return result
    }

    private func serveConnections(_ running: Running) async -> HostError? {
        let device = running.device
        let endpoint = running.endpoint
        var advertised = await device.currentAdvertisement.peer.address
        var first = true
        while !isStopping {
            let advertisement = await device.currentAdvertisement
            if !first {
                do throws(AdapterError) {
                    try await endpoint.advertise(advertisement)
                } catch {
                    return isStopping ? nil : HostError(.advertise, error.reason, cause: error)
                }
                if advertisement.peer.address != advertised {
                    advertised = advertisement.peer.address
                    emitAdvertising(advertisement)
                }
            }
            first = false
            let connection: PeripheralConnection
            do {
                connection = try await endpoint.accept()
            } catch {
                if isStopping || error.code == .closed { return nil }
                return HostError(.accept, "\(running.entry.name): accept failed: \(error)", cause: error)
            }
            let identity = running.entry.identity
            let admitted = shared.withLock { state -> Bool in
                guard !state.stopping else { return false }
                state.connections[identity] = connection
                return true
            }
            guard admitted else {
                connection.closeNow()
                return nil
            }
            // Which process connected (SO_PEERCRED) and its parent: the line's tests prove from these lines that no
            // two stations updated one device at once.
            let peer = connection.peerProcessID.map(PeerProcess.init(pid:))
            await endpoint.connected()
            events.emit("connected", device: running.entry, address: advertisement.peer.address, name: nil, peer: peer)
            await device.serve(connection.bearer)
            await connection.end()
            _ = shared.withLock { $0.connections.removeValue(forKey: identity) }
            events.emit("disconnected", device: running.entry, address: advertisement.peer.address, name: nil, peer: peer)
        }
        return nil
    }

    /// Registers `endpoint` for ``stop()``; closes it and throws when stopping already.
    private func register(_ endpoint: any BLEPeripheral, identity: BluetoothAddress) throws(AdapterError)
        -> any BLEPeripheral
    {
        let registered = shared.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.endpoints[identity] = endpoint
            return true
        }
        guard registered else {
            endpoint.close()
            throw AdapterError(.system, "stopping")
        }
        return endpoint
    }

    private func emitAdvertising(_ advertisement: Advertisement) {
        events.emit(
            "advertising", device: nil, address: advertisement.peer.address, name: advertisement.parsed.name ?? "", peer: nil)
    }

    private func makeDirectory(_ path: String) throws(HostError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw HostError(.files, "cannot create \(path): \(error.localizedDescription)", cause: error)
        }
    }
}

/// Writes a hosted device's status to its status file (and state file) on every change, atomically, and reports the
/// faults that fired since the previous snapshot.
public final class StatusReporter: Sendable {
    public let name: String
    public let paths: [String]
    /// `STATE_DIR/<identity>.state.json` (with `--state-dir`).
    public let persistentPath: String?
    let events: any HostEvents
    private let reported = Mutex((faults: 0, lastError: ""))

    public init(name: String, identity: BluetoothAddress, statusDirectory: String, stateDirectory: String?, events: any HostEvents) {
        self.name = name
        let file = SimulatorHostFiles.stateName(identity)
        self.paths = [statusDirectory + "/" + file] + (stateDirectory.map { [$0 + "/" + file] } ?? [])
        self.persistentPath = stateDirectory.map { $0 + "/" + SimulatorHostFiles.persistentStateName(identity) }
        self.events = events
    }

    /// Writes the device's flash and settings snapshot to its state file, atomically.
    public func persist(_ state: some Encodable) {
        guard let persistentPath else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(state) else { return }
        write(data, to: persistentPath)
    }

    /// Writes the status snapshot to the status file(s) and reports the faults fired since the last one.
    public func publish(_ state: some HostedDeviceStatus) {
        let faults = state.firedFaults
        let newFaults = reported.withLock { reported -> ArraySlice<FaultRecord> in
            let fresh = faults.dropFirst(min(reported.faults, faults.count))
            reported.faults = faults.count
            return fresh
        }
        for record in newFaults { events.fault(record, device: name, address: state.address) }
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

/// The process at the other end of a local link (SO_PEERCRED) and its parent (from /proc/PID/stat, read while the
/// connecting process runs).
public struct PeerProcess: Sendable, Hashable {
    public var pid: Int32
    public var parent: Int32?

    public init(pid: Int32) {
        self.pid = pid
        // Field 4 of /proc/PID/stat, after the command name in parentheses (which may hold spaces).
        let stat = FileManager.default.contents(atPath: "/proc/\(pid)/stat").map { String(decoding: $0, as: UTF8.self) } ?? ""
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        parent = fields.count > 1 ? Int32(fields[1]) : nil
    }
}
