import BLECore
import DFUSimulator
import Foundation
import Logging
import PlatformIO
import Synchronization
import VirtualRadio

/// Runs virtual devices on a virtual radio directory (`bledfu simulate`): per device, an endpoint at the address
/// it currently advertises, one connection at a time served by `VirtualDevice.serve`, re-advertising after each
/// connection and moving the endpoint when the address changes (buttonless jump, end of an update).
///
/// ``stop()`` may be called from any thread (a signal handler's queue): it closes every endpoint (removing its
/// `.sock` and `.adv` files) and every open connection, which ends the device loops.
final class SimulatorHost: Sendable {
    struct Running: Sendable {
        var device: VirtualDevice
        var spec: SimulatedDeviceSpec
        var reporter: StatusReporter
        var endpoint: VirtualPeripheralEndpoint
    }

    private struct Shared {
        var stopping = false
        var endpoints: [BluetoothAddress: VirtualPeripheralEndpoint] = [:]
        var connections: [BluetoothAddress: SocketBearer] = [:]
    }

    let radioDirectory: String
    let events: SimulatorEvents
    private let shared = Mutex(Shared())

    init(radioDirectory: String, events: SimulatorEvents) {
        self.radioDirectory = radioDirectory
        self.events = events
    }

    var isStopping: Bool { shared.withLock { $0.stopping } }

    /// Makes the devices and their first endpoints; throws (and closes what it opened) when one cannot listen.
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
                let restoring = stateDirectory.flatMap { SimulatorFiles.loadPersistentState(spec.identity, from: $0) }
                let persistentSink: (@Sendable (DevicePersistentState) async -> Void)? =
                    stateDirectory == nil ? nil : { @Sendable state in reporter.persist(state) }
                let device = VirtualDevice(
                    profile: spec.profile, faults: spec.faults, clock: ContinuousClock(),
                    statusSink: { state in reporter.publish(state) }, restoring: restoring,
                    persistentSink: persistentSink,
                    logger: Logger(label: "bledfu.simulator.\(spec.profile.name)"))
                if stateDirectory != nil { reporter.persist(await device.persistentState()) }
                reporter.publish(await device.state())
                let endpoint = try openEndpoint(await device.currentAdvertisement, identity: spec.identity)
                running.append(Running(device: device, spec: spec, reporter: reporter, endpoint: endpoint))
            }
        } catch {
            stop()
            throw error
        }
        return running
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
        let (endpoints, connections) = shared.withLock { state in
            state.stopping = true
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
        let device = running.device
        let identity = running.spec.identity
        var endpoint = running.endpoint
        defer { endpoint.close() }
        while !isStopping {
            let advertisement = await device.currentAdvertisement
            if advertisement.peer.address != endpoint.peer.address {
                endpoint.close()
                do {
                    endpoint = try openEndpoint(advertisement, identity: identity)
                } catch {
                    return isStopping ? nil : error
                }
            } else {
                do throws(AdapterError) {
                    try endpoint.updateAdvertisement(advertisement)
                } catch {
                    return CLIError(error)
                }
            }
            let bearer: SocketBearer
            do {
                bearer = try await endpoint.acceptSocket()
            } catch {
                if isStopping || error.code == .closed { return nil }
                return CLIError("\(running.spec.profile.name): accept failed: \(error)", exitCode: BledfuExit.failure)
            }
            let admitted = shared.withLock { state -> Bool in
                guard !state.stopping else { return false }
                state.connections[identity] = bearer
                return true
            }
            guard admitted else {
                bearer.closeNow()
                return nil
            }
            events.emit("connected", device: running.spec, address: advertisement.peer.address)
            await device.serve(bearer)
            await bearer.close()
            _ = shared.withLock { $0.connections.removeValue(forKey: identity) }
            events.emit("disconnected", device: running.spec, address: advertisement.peer.address)
        }
        return nil
    }

    /// Opens the endpoint for `advertisement` and registers it for ``stop()``.
    private func openEndpoint(_ advertisement: Advertisement, identity: BluetoothAddress) throws(CLIError)
        -> VirtualPeripheralEndpoint
    {
        let endpoint: VirtualPeripheralEndpoint
        do {
            endpoint = try VirtualPeripheralEndpoint(radio: radioDirectory, advertisement: advertisement)
        } catch {
            throw CLIError(error)
        }
        let registered = shared.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.endpoints[identity] = endpoint
            return true
        }
        guard registered else {
            endpoint.close()
            throw CLIError("stopping", exitCode: BledfuExit.success)
        }
        events.emit(
            "advertising", device: nil, address: advertisement.peer.address,
            name: advertisement.parsed.name ?? "")
        return endpoint
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

    func emit(_ event: String, device: SimulatedDeviceSpec?, address: BluetoothAddress, name: String? = nil) {
        let label = name ?? device?.profile.name ?? ""
        if json {
            Console.json(["event": event, "address": address.description, "name": label])
        } else {
            Console.errorRaw("bledfu simulate: \(label) \(address) \(event)")
        }
    }

    func fault(_ record: FaultRecord, device: SimulatedDeviceSpec, address: String) {
        if json {
            Console.json([
                "event": "fault", "name": device.profile.name, "address": address, "kind": record.kind,
                "trigger": record.trigger, "bytes_received": Int(clamping: record.bytesReceived),
                "at_ms": record.atMilliseconds,
            ])
        } else {
            Console.errorRaw("bledfu simulate: \(device.profile.name) \(address) fault \(record)")
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
    func persist(_ state: DevicePersistentState) {
        guard let persistentPath else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(state) else { return }
        write(data, to: persistentPath)
    }

    func publish(_ state: DeviceState) {
        let newFaults = reported.withLock { reported -> ArraySlice<FaultRecord> in
            let fresh = state.faults.dropFirst(min(reported.faults, state.faults.count))
            reported.faults = state.faults.count
            return fresh
        }
        for record in newFaults { events.fault(record, device: spec, address: state.address) }
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
