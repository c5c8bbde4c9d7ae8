import BLECore

/// The simulator host (`bledfu simulate`) and the in-process adapters serve SMP devices like the others: one
/// connection at a time, at the advertisement of the moment (an SMP device keeps its address across resets).
extension VirtualSMPDevice: HostedDevice {
    public nonisolated var identityAddress: BluetoothAddress { profile.address }
}

/// An SMP device's faults are counted as text ("disconnect after 8192 bytes", "lie:wrong-rc"); the host reports
/// each as a fault record of that kind (no trigger or byte count of its own).
extension SMPDeviceState: HostedDeviceStatus {
    public var firedFaults: [FaultRecord] {
        counters.faults.map { FaultRecord(kind: $0, trigger: "", bytesReceived: 0, atMilliseconds: 0) }
    }
}
