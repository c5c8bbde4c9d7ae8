/// A 48-bit Bluetooth device address.
///
/// Written most significant byte first ("C0:FF:EE:00:00:01"); ``bytes`` holds it in that order. On the wire and in
/// `bdaddr_t` the order is reversed (least significant byte first): use ``littleEndianBytes``.
public struct BluetoothAddress: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// Most significant byte first.
    public let bytes: [UInt8]

    /// - Parameter bytes: six bytes, most significant first. Fewer or more bytes give nil.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 6 else { return nil }
        self.bytes = bytes
    }

    /// From `bdaddr_t` / wire order (least significant byte first).
    public init?(littleEndianBytes: [UInt8]) {
        self.init(bytes: littleEndianBytes.reversed())
    }

    /// Parses "AA:BB:CC:DD:EE:FF" (also with '-' separators, any case).
    public init?(_ text: String) {
        let parts = text.split(omittingEmptySubsequences: false) { $0 == ":" || $0 == "-" }
        guard parts.count == 6 else { return nil }
        var out: [UInt8] = []
        for part in parts {
            guard part.count == 2, let byte = UInt8(part, radix: 16) else { return nil }
            out.append(byte)
        }
        self.bytes = out
    }

    public var littleEndianBytes: [UInt8] { bytes.reversed() }

    public var description: String {
        bytes.map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return hex.count == 1 ? "0" + hex : hex
        }.joined(separator: ":")
    }

    /// The address a Nordic bootloader without bonds advertises at after a buttonless jump: the least significant
    /// byte plus one, wrapping without carry (`addr.addr[0] += 1` in the nRF5 SDK's `gap_address_change`).
    public var nordicBootloaderAddress: BluetoothAddress {
        var b = bytes
        b[5] = b[5] &+ 1
        return BluetoothAddress(bytes: b) ?? self
    }

    /// The inverse of ``nordicBootloaderAddress``: where the application of a bootloader at this address advertises.
    public var nordicApplicationAddress: BluetoothAddress {
        var b = bytes
        b[5] = b[5] &- 1
        return BluetoothAddress(bytes: b) ?? self
    }

    public static func < (lhs: BluetoothAddress, rhs: BluetoothAddress) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let address = BluetoothAddress(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a Bluetooth address: \(text)")
        }
        self = address
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// The LE address type of a peer (Core Vol 6 Part B 1.3).
public enum AddressType: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case `public`
    case random

    public var description: String { rawValue }
}

/// An address with its type: what a connection needs.
public struct PeerAddress: Hashable, Sendable, Codable, CustomStringConvertible {
    public var address: BluetoothAddress
    public var type: AddressType

    public init(_ address: BluetoothAddress, type: AddressType) {
        self.address = address
        self.type = type
    }

    public var description: String { "\(address) (\(type))" }
}
