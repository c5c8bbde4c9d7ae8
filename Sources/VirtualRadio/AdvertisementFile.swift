import BLECore
import Foundation

/// The advertisement file of a virtual device (docs/virtual-radio.md, "Advertisement files").
///
/// UTF-8 text, one `key=value` per line ('\n'), `#` starts a comment line, unknown keys are ignored:
///
///     address=C0:FF:EE:00:00:01      required; must match the file name
///     address_type=random            public | random (default random)
///     rssi=-50                       signed decimal dBm (optional)
///     connectable=1                  1 | 0 (default 1)
///     data=0201060909...             hex of the raw AD structures (advertising data + scan response), may be empty
///     interval_ms=25                 the advertising interval in ms (optional; a central's connection waits for
///                                    the next advertising event: docs/virtual-radio.md §4.2)
///     directed_to=default            directed advertising to the central adapter of that name (optional): other
///                                    adapters do not see it
public enum AdvertisementFile {
    /// Why an advertisement file was rejected.
    public struct ParseError: CodedError, Sendable {
        public struct Code: RawRepresentable, Hashable, Sendable {
            public var rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }
            /// A line of the file is not `key=value` with a known key and a valid value.
            public static let invalidAdvertisement = Code(rawValue: "invalid-advertisement")
        }

        public var code: Code { .invalidAdvertisement }
        public var line: Int
        public var reason: String
        public var message: String { "line \(line): \(reason)" }
        public var description: String { message }
    }

    /// "C0-FF-EE-00-00-01": the address in a file name (upper-case hex, '-' separators).
    public static func baseName(_ address: BluetoothAddress) -> String {
        address.description.replacingOccurrences(of: ":", with: "-")
    }

    public static func socketName(_ address: BluetoothAddress) -> String { baseName(address) + ".sock" }
    public static func advertisementName(_ address: BluetoothAddress) -> String { baseName(address) + ".adv" }

    /// The address a file name stands for ("C0-FF-EE-00-00-01.adv"), nil for other names.
    public static func address(fromFileName name: String, suffix: String) -> BluetoothAddress? {
        guard name.hasSuffix(suffix), !name.hasPrefix(".") else { return nil }
        return BluetoothAddress(String(name.dropLast(suffix.count)))
    }

    public static func encode(_ advertisement: Advertisement, intervalMilliseconds: Double? = nil) -> String {
        var lines = [
            "# bledfu virtual radio advertisement",
            "address=\(advertisement.peer.address)",
            "address_type=\(advertisement.peer.type)",
        ]
        if let rssi = advertisement.rssi { lines.append("rssi=\(rssi)") }
        lines.append("connectable=\(advertisement.connectable ? 1 : 0)")
        lines.append("data=\(advertisement.data.hexString)")
        if let intervalMilliseconds { lines.append("interval_ms=\(intervalMilliseconds)") }
        if let target = advertisement.directedTo { lines.append("directed_to=\(target)") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The `interval_ms` of an advertisement file's text (nil when absent or not a positive number).
    public static func interval(in text: String) -> Double? {
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2, parts[0] == "interval_ms", let value = Double(parts[1]), value > 0, value.isFinite {
                return value
            }
        }
        return nil
    }

    public static func parse(_ text: String) throws(ParseError) -> Advertisement {
        var address: BluetoothAddress?
        var type = AddressType.random
        var rssi: Int8?
        var connectable = true
        var data: [UInt8] = []
        var directedTo: String?
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            let number = index + 1
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ParseError(line: number, reason: "expected key=value")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            switch key {
            case "address":
                guard let parsed = BluetoothAddress(value) else {
                    throw ParseError(line: number, reason: "bad address \(value)")
                }
                address = parsed
            case "address_type":
                guard let parsed = AddressType(rawValue: value.lowercased()) else {
                    throw ParseError(line: number, reason: "bad address_type \(value)")
                }
                type = parsed
            case "rssi":
                guard let parsed = Int8(value) else { throw ParseError(line: number, reason: "bad rssi \(value)") }
                rssi = parsed
            case "connectable":
                guard value == "0" || value == "1" else {
                    throw ParseError(line: number, reason: "bad connectable \(value)")
                }
                connectable = value == "1"
            case "data":
                guard let parsed = [UInt8](hexString: value) else {
                    throw ParseError(line: number, reason: "bad hex data")
                }
                data = parsed
            case "directed_to":
                guard !value.isEmpty else { throw ParseError(line: number, reason: "empty directed_to") }
                directedTo = value
            default:
                continue  // unknown keys are ignored (forward compatibility)
            }
        }
        guard let address else { throw ParseError(line: 0, reason: "no address") }
        return Advertisement(
            peer: PeerAddress(address, type: type), rssi: rssi, data: data, connectable: connectable, directedTo: directedTo)
    }
}
