import BLECore
import DFUSimulator
import Foundation
import Logging

// The simulated devices `bledfu simulate` hosts: their profiles, the factory of each family's device (restored from
// the state directory, reporting to the host's status files) and the state files they keep. The CLI parses the
// command line and renders; what it hosts is made here.

/// A simulated device's profile: Secure DFU, Legacy DFU (`"family": "legacy"` in its JSON) or MCUmgr SMP into
/// MCUboot (`"family": "smp"`).
public enum SimulatedProfile: Sendable {
    case secure(DeviceProfile)
    case legacy(LegacyDeviceProfile)
    case smp(SMPDeviceProfile)

    public var name: String {
        switch self {
        case .secure(let profile): profile.name
        case .legacy(let profile): profile.name
        case .smp(let profile): profile.name
        }
    }

    public var address: BluetoothAddress {
        switch self {
        case .secure(let profile): profile.address
        case .legacy(let profile): profile.address
        case .smp(let profile): profile.address
        }
    }
}

/// One device instance ready to run: its profile after overrides and the faults it injects.
public struct SimulatedDeviceSpec: Sendable {
    public var device: SimulatedProfile
    public var faults: FaultPlan

    public init(device: SimulatedProfile, faults: FaultPlan) {
        self.device = device
        self.faults = faults
    }

    /// The identity (application-mode) address: the key of its status and state files.
    public var identity: BluetoothAddress { device.address }
    public var name: String { device.name }

    /// The device as the host makes it: restored from `--state-dir`, reporting to the host's status files. One
    /// factory per family (a new family adds a case to ``SimulatedProfile`` and a factory here).
    public func hostedEntry(stateDirectory: String?, sharedAir: SharedAir? = nil) -> HostedDeviceEntry {
        let spec = self
        return HostedDeviceEntry(identity: identity, name: name) { reporter in
            let logger = Logger(label: "bledfu.simulator.\(spec.name)")
            switch spec.device {
            case .secure(let profile):
                return spec.makeSecure(
                    profile, reporter: reporter, stateDirectory: stateDirectory, logger: logger, sharedAir: sharedAir)
            case .legacy(let profile):
                return spec.makeLegacy(
                    profile, reporter: reporter, stateDirectory: stateDirectory, logger: logger, sharedAir: sharedAir)
            case .smp(let profile):
                return await SMPSimulator.makeDevice(
                    profile, faults: spec.faults, reporter: reporter, stateDirectory: stateDirectory, sharedAir: sharedAir)
            }
        }
    }

    private func makeSecure(
        _ profile: DeviceProfile, reporter: StatusReporter, stateDirectory: String?, logger: Logger, sharedAir: SharedAir?
    ) -> VirtualDevice
    {
        let restoring = stateDirectory.flatMap { SimulatorFiles.loadPersistentState(identity, from: $0) }
        let persistentSink: (@Sendable (DevicePersistentState) async -> Void)? =
            stateDirectory == nil ? nil : { @Sendable state in reporter.persist(state) }
        return VirtualDevice(
            profile: profile, faults: faults, clock: ContinuousClock(), statusSink: { state in reporter.publish(state) },
            restoring: restoring, persistentSink: persistentSink, logger: logger, sharedAir: sharedAir)
    }

    private func makeLegacy(
        _ profile: LegacyDeviceProfile, reporter: StatusReporter, stateDirectory: String?, logger: Logger,
        sharedAir: SharedAir?
    ) -> VirtualLegacyDevice {
        let restoring = stateDirectory.flatMap { SimulatorFiles.loadLegacyPersistentState(identity, from: $0) }
        let persistentSink: (@Sendable (LegacyPersistentState) async -> Void)? =
            stateDirectory == nil ? nil : { @Sendable state in reporter.persist(state) }
        return VirtualLegacyDevice(
            profile: profile, faults: faults, clock: ContinuousClock(), statusSink: { state in reporter.publish(state) },
            restoring: restoring, persistentSink: persistentSink, logger: logger, sharedAir: sharedAir)
    }
}

/// File names of the simulator.
public enum SimulatorFiles {
    /// "C6-05-04-03-02-01.json": a device's status or state file, by identity address.
    public static func stateName(_ address: BluetoothAddress) -> String { SimulatorHostFiles.stateName(address) }

    /// "C6-05-04-03-02-01.state.json": a device's flash and bootloader settings (`--state-dir`).
    public static func persistentStateName(_ address: BluetoothAddress) -> String {
        SimulatorHostFiles.persistentStateName(address)
    }

    /// The Legacy device's flash `--state-dir` kept (nil when absent or unreadable).
    public static func loadLegacyPersistentState(_ identity: BluetoothAddress, from stateDirectory: String)
        -> LegacyPersistentState?
    {
        let path = stateDirectory + "/" + persistentStateName(identity)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(LegacyPersistentState.self, from: data)
    }

    /// The flash and settings `--state-dir` kept for the device with this identity (nil when absent or unreadable).
    public static func loadPersistentState(_ identity: BluetoothAddress, from stateDirectory: String)
        -> DevicePersistentState?
    {
        loadPersistentState(DevicePersistentState.self, identity, from: stateDirectory)
    }

    /// A device's persistent state of its family's type (SMP: the MCUboot slots).
    public static func loadPersistentState<State: Decodable>(
        _ type: State.Type, _ identity: BluetoothAddress, from stateDirectory: String
    ) -> State? {
        let path = stateDirectory + "/" + persistentStateName(identity)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(State.self, from: data)
    }
}

/// `bledfu simulate --device smp-sensor`: the SMP devices' part of the simulator (docs/simulator.md, "SMP devices").
public enum SMPSimulator {
    /// Makes the virtual SMP device of `profile`, restoring its slots from `--state-dir`, writing its status file on
    /// every change and its slots to the state directory.
    public static func makeDevice(
        _ profile: SMPDeviceProfile, faults: FaultPlan, reporter: StatusReporter, stateDirectory: String?,
        sharedAir: SharedAir? = nil
    ) async -> VirtualSMPDevice {
        let restoring = stateDirectory.flatMap {
            SimulatorFiles.loadPersistentState(SMPDevicePersistentState.self, profile.address, from: $0)
        }
        let persistentSink: (@Sendable (SMPDevicePersistentState) async -> Void)? =
            stateDirectory == nil ? nil : { @Sendable state in reporter.persist(state) }
        let device = VirtualSMPDevice(
            profile: profile, faults: SMPFaults(plan: faults, crashNewImage: faults.crashNewImage == true), clock: ContinuousClock(),
            restoring: restoring,
            statusSink: { state in reporter.publish(state) }, persistentSink: persistentSink,
            logger: Logger(label: "bledfu.simulator.\(profile.name)"), sharedAir: sharedAir)
        if stateDirectory != nil { reporter.persist(await device.persistentState()) }
        reporter.publish(await device.state())
        return device
    }
}

