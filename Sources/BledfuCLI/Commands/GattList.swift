import ATT
import ArgumentParser
import BLECore
import GATT

/// `bledfu gatt list`: the device's GATT database.
struct GattList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List services, characteristics and descriptors (and readable values).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var device: DeviceOptions
    @Flag(name: .long, help: "Also read every readable characteristic.") var values = false

    func run() async throws {
        try await withConnection(options, device) { connection in
            let mtu = await connection.att.mtu
            let services = try await connection.gatt.discoverAll()
            if options.json {
                Console.json(["event": "connected", "device": device.device, "mtu": mtu])
            } else {
                print("Connected to \(device.device), ATT MTU \(mtu)")
            }
            for service in services {
                if options.json {
                    var event: [String: any Sendable] = [
                        "event": "service", "uuid": service.uuid.description,
                        "start": Int(service.handleRange.start), "end": Int(service.handleRange.end),
                    ]
                    if let name = AssignedNumbers.name(of: service.uuid) { event["name"] = name }
                    Console.json(event)
                } else {
                    print("service \(AssignedNumbers.label(service.uuid)) handles 0x\(hex4(service.handleRange.start))-0x\(hex4(service.handleRange.end))")
                }
                for characteristic in service.characteristics {
                    var value: [UInt8]?
                    if values, characteristic.properties.contains(.read) {
                        value = try? await connection.gatt.readLong(handle: characteristic.valueHandle)
                    }
                    if options.json {
                        var event: [String: any Sendable] = [
                            "event": "characteristic", "service": service.uuid.description,
                            "uuid": characteristic.uuid.description, "handle": Int(characteristic.valueHandle),
                            "properties": characteristic.properties.names,
                        ]
                        if let name = AssignedNumbers.name(of: characteristic.uuid) { event["name"] = name }
                        if let value { event["value"] = value.hexString }
                        Console.json(event)
                    } else {
                        var line = "  characteristic \(AssignedNumbers.label(characteristic.uuid)) value 0x"
                            + "\(hex4(characteristic.valueHandle)) (\(characteristic.properties.words))"
                        if let value { line += " = \(value.hexString)\(printable(value))" }
                        print(line)
                    }
                    for descriptor in characteristic.descriptors where !options.json {
                        print("    descriptor \(AssignedNumbers.label(descriptor.uuid)) 0x\(hex4(descriptor.handle))")
                    }
                }
            }
        }
    }
}

func hex4(_ value: UInt16) -> String {
    let text = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: 4 - text.count) + text
}

/// ` "text"` when the bytes are printable UTF-8, else "".
func printable(_ bytes: [UInt8]) -> String {
    guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return "" }
    return " \"\(String(decoding: bytes, as: UTF8.self))\""
}
