import ATT
import BLECore

/// A virtual device a host serves connections for (`bledfu simulate`, the in-process adapter of the tests): what it
/// advertises now, and one connection at a time on a bearer. ``VirtualDevice`` (Secure DFU) and
/// ``VirtualLegacyDevice`` (Legacy DFU) conform.
public protocol HostedDevice: Actor {
    /// The identity address (application mode), which names the device in status files and logs.
    nonisolated var identityAddress: BluetoothAddress { get }
    /// The advertisement of the current mode (address and data change with a jump or a reset).
    var currentAdvertisement: Advertisement { get }
    /// Serves one connection until the link ends.
    func serve(_ bearer: any ATTBearer) async
}

extension VirtualDevice: HostedDevice {
    public nonisolated var identityAddress: BluetoothAddress { profile.address }
}

extension VirtualLegacyDevice: HostedDevice {
    public nonisolated var identityAddress: BluetoothAddress { profile.address }
}
