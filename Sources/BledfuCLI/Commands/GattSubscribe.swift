import ArgumentParser
import Batch
import BLECore
import GATT

/// `bledfu gatt subscribe`: enable notifications or indications and print them.
struct GattSubscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe", abstract: "Subscribe to a characteristic and print its notifications or indications.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Argument(help: "A characteristic UUID (notify or indicate).") var target: String
    @Option(name: .long, help: "Stop after this many values (default: until the device disconnects).") var count: Int?
    @Option(name: .long, help: "Hex bytes to write to the characteristic after subscribing.") var thenWrite: String?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let thenWrite, [UInt8](hexString: thenWrite) == nil { throw ValidationError("--then-write takes hex bytes") }
    }

    func run() async throws {
        try await withConnection(options, device) { connection in
            let (handle, found) = try await resolveValueHandle(target, connection.gatt)
            guard let characteristic = found else {
                throw ValidationError("subscribe needs a characteristic UUID (its CCCD is found by discovery)")
            }
            if characteristic.properties.contains(.notify) {
                try await connection.gatt.setNotifications(true, of: characteristic)
            } else if characteristic.properties.contains(.indicate) {
                try await connection.gatt.setIndications(true, of: characteristic)
            } else {
                throw CLIError("characteristic \(characteristic.uuid) neither notifies nor indicates", exitCode: BledfuExit.protocolError)
            }
            // Say that it waits: nothing else shows until the device sends a value (issue 19 point 8).
            if options.json {
                Console.json([
                    "event": "subscribed", "uuid": characteristic.uuid.description, "handle": Int(handle),
                    "kind": characteristic.properties.contains(.notify) ? "notification" : "indication",
                ])
            } else if !options.quiet {
                Console.out(
                    "subscribed to \(AssignedNumbers.label(characteristic.uuid)) (0x\(hex4(handle))); waiting for "
                        + "\(characteristic.properties.contains(.notify) ? "notifications" : "indications") (Ctrl-C stops)")
            }
            if let thenWrite, let bytes = [UInt8](hexString: thenWrite) {
                try await connection.gatt.write(handle: handle, value: bytes)
            }
            var received = 0
            for await notification in connection.gatt.notifications where notification.handle == handle {
                received += 1
                if options.json {
                    Console.json([
                        "event": notification.isIndication ? "indication" : "notification", "handle": Int(handle),
                        "value": notification.value.hexString,
                    ])
                } else {
                    Console.out("0x\(hex4(handle)): \(notification.value.hexString)\(printable(notification.value))")
                }
                if let count, received >= count { return }
            }
            throw CLIError("the device disconnected", exitCode: BledfuExit.disconnected)
        }
    }
}
