import BLECore

/// The simulator host (`bledfu simulate`) and the in-process adapters serve SMP devices like the others: one
/// connection at a time, at the advertisement of the moment (an SMP device keeps its address across resets).
extension VirtualSMPDevice: HostedDevice {
    public nonisolated var identityAddress: BluetoothAddress { profile.address }
}
