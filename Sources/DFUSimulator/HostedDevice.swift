import BLECore

/// A virtual device as a simulator host (`SimulatorHost`, `bledfu simulate`) serves it: one connection at a time
/// over a bearer, the advertisement of its current mode (the address moves with a buttonless jump), a status
/// snapshot (its status file) and the state that survives a power cycle (its `--state-dir` file). ``VirtualDevice``
/// (Secure DFU) conforms; a Legacy DFU or MCUmgr SMP virtual device conforms the same way to be hosted.
public protocol HostedDevice: Actor {
    associatedtype Status: HostedDeviceStatus
    associatedtype Persistent: Codable & Sendable

    /// The advertisement of the current mode.
    var currentAdvertisement: Advertisement { get }
    /// Serves one connection until the link ends (the device or the central drops it).
    func serve(_ bearer: any ATTBearer) async
    /// What the device looks like now (written to its status file).
    func state() -> Status
    /// What survives a power cycle: installed images, settings (written to its state file).
    func persistentState() -> Persistent
}

/// A hosted device's status snapshot.
public protocol HostedDeviceStatus: Encodable, Sendable {
    /// The address the device uses now.
    var address: String { get }
    /// The faults that fired so far, oldest first (the host reports each new one once).
    var firedFaults: [FaultRecord] { get }
}

extension VirtualDevice: HostedDevice {}

extension DeviceState: HostedDeviceStatus {
    public var firedFaults: [FaultRecord] { faults }
}
