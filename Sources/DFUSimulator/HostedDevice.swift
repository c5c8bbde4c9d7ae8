import ATT
import BLECore

/// A virtual device as a host serves it (`SimulatorHost` for `bledfu simulate`, the in-process adapter of the
/// tests): its identity, one connection at a time over a bearer, the advertisement of its current mode (the address
/// moves with a buttonless jump), a status snapshot (its status file) and the state that survives a power cycle (its
/// `--state-dir` file). ``VirtualDevice`` (Secure DFU) and ``VirtualLegacyDevice`` (Legacy DFU) conform; another
/// family's virtual device conforms the same way to be hosted.
public protocol HostedDevice: Actor {
    associatedtype Status: HostedDeviceStatus
    associatedtype Persistent: Codable & Sendable

    /// The identity address (application mode), which names the device in status files and logs.
    nonisolated var identityAddress: BluetoothAddress { get }
    /// The advertisement of the current mode (address and data change with a jump or a reset).
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

extension VirtualDevice: HostedDevice {
    public nonisolated var identityAddress: BluetoothAddress { profile.address }
}

extension DeviceState: HostedDeviceStatus {
    public var firedFaults: [FaultRecord] { faults }
}

extension VirtualLegacyDevice: HostedDevice {
    public nonisolated var identityAddress: BluetoothAddress { profile.address }
}

extension LegacyDeviceState: HostedDeviceStatus {
    public var firedFaults: [FaultRecord] { faults }
}
