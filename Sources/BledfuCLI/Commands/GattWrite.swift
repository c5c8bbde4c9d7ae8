import ArgumentParser
import BLECore
import GATT

/// `bledfu gatt write`: write with or without response.
struct GattWrite: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write", abstract: "Write hex bytes to a characteristic (by UUID) or an attribute (by 0xHANDLE).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Argument(help: "A characteristic UUID or an attribute handle (0x000E).") var target: String
    @Argument(help: "The value in hex (01ff or 01:ff).") var value: String
    @Flag(name: .long, help: "Use a Write Command (write without response).") var noResponse = false

    func validate() throws {
        guard [UInt8](hexString: value) != nil else { throw ValidationError("the value must be hex bytes, like 0100") }
    }

    func run() async throws {
        let bytes = [UInt8](hexString: value) ?? []
        try await withConnection(options, device) { connection in
            let (handle, _) = try await resolveValueHandle(target, connection.gatt)
            if noResponse {
                try await connection.gatt.writeWithoutResponse(handle: handle, value: bytes)
            } else {
                try await connection.gatt.write(handle: handle, value: bytes)
            }
            if options.json {
                Console.json(["event": "written", "handle": Int(handle), "value": bytes.hexString, "response": !noResponse])
            } else {
                print("wrote \(bytes.count) byte(s) to 0x\(hex4(handle))\(noResponse ? " (without response)" : "")")
            }
        }
    }
}
