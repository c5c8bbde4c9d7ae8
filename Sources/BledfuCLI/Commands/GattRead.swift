import ArgumentParser
import BLECore
import GATT

/// `bledfu gatt read`: read one attribute (long reads included).
struct GattRead: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read", abstract: "Read a characteristic (by UUID) or an attribute (by 0xHANDLE).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Argument(help: "A characteristic UUID (2A00) or an attribute handle (0x0003).") var target: String

    func run() async throws {
        try await withConnection(options, device) { connection in
            let (handle, _) = try await resolveValueHandle(target, connection.gatt)
            let value = try await connection.gatt.readLong(handle: handle)
            if options.json {
                Console.json(["event": "value", "handle": Int(handle), "value": value.hexString])
            } else {
                print("0x\(hex4(handle)): \(value.hexString)\(printable(value))")
            }
        }
    }
}
