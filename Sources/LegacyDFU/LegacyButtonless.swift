import BLECore

/// The legacy buttonless jump (SDK 11 `dfu_app_handler.c`, Bluefruit `BLEDfu.cpp`; legacy-dfu.md §8): with the
/// Control Point's notifications on, Start DFU (`01 04`) written to an application reporting DFU Version 0.1 makes
/// it hand its peer data to the bootloader and jump; the link drops. The write is authorized before the jump, but a
/// link that drops before its Write Response is not an error either (iOS and Android tolerate it).
public enum LegacyButtonless {
    public struct Outcome: Hashable, Sendable {
        /// Where to look for the bootloader.
        public var location: LegacyBootloaderLocation
        /// The write was acknowledged (false: the link dropped first; the jump probably happened).
        public var acknowledged: Bool
    }

    /// Writes Start DFU to the application's Control Point. Throws only when the device refuses the write (an ATT
    /// error such as 0xFD: notifications off), which means no jump.
    public static func enterBootloader(
        over transport: any LegacyDFUTransport, address: BluetoothAddress, version: LegacyDFUVersion?
    ) async throws(LegacyTransportError) -> Outcome {
        let location = LegacyBootloaderLocation.afterJump(from: address, version: version)
        do {
            try await transport.writeControlPoint(LegacyRequest.startDFU(.application).encoded)
            return Outcome(location: location, acknowledged: true)
        } catch where error.code == .disconnected {
            return Outcome(location: location, acknowledged: false)
        }
    }
}
