/// A Bluetooth UUID: 16-bit SIG-assigned, 32-bit, or full 128-bit (Core Vol 3 Part B 2.5.1).
///
/// 16- and 32-bit UUIDs are aliases inside the Bluetooth base UUID `0000xxxx-0000-1000-8000-00805F9B34FB`;
/// equality compares the 128-bit value, so `FE59` equals `0000FE59-0000-1000-8000-00805F9B34FB`.
public struct BluetoothUUID: Hashable, Sendable, CustomStringConvertible, Codable {
    /// 128-bit value, most significant byte first (as written).
    public let bigEndianBytes: [UInt8]

    static let base: [UInt8] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB,
    ]

    public init(_ short: UInt16) {
        var b = Self.base
        b[2] = UInt8(short >> 8)
        b[3] = UInt8(short & 0xFF)
        bigEndianBytes = b
    }

    public init(uuid32: UInt32) {
        var b = Self.base
        b[0] = UInt8(uuid32 >> 24)
        b[1] = UInt8((uuid32 >> 16) & 0xFF)
        b[2] = UInt8((uuid32 >> 8) & 0xFF)
        b[3] = UInt8(uuid32 & 0xFF)
        bigEndianBytes = b
    }

    /// 16 bytes, most significant first.
    public init?(bigEndianBytes: [UInt8]) {
        guard bigEndianBytes.count == 16 else { return nil }
        self.bigEndianBytes = bigEndianBytes
    }

    /// From the wire (ATT, advertising data): 2, 4 or 16 bytes, least significant first.
    public init?(littleEndianBytes bytes: [UInt8]) {
        switch bytes.count {
        case 2: self.init(UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
        case 4:
            self.init(
                uuid32: UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24)
        case 16: self.init(bigEndianBytes: bytes.reversed())
        default: return nil
        }
    }

    /// Parses "FE59", "0000FE59", or "8EC90001-F315-4F60-9FB8-838830DAEA50" (any case).
    public init?(_ text: String) {
        let hex = text.filter { $0 != "-" }
        guard let bytes = [UInt8](hexString: hex) else { return nil }
        switch bytes.count {
        case 2: self.init(UInt16(bytes[0]) << 8 | UInt16(bytes[1]))
        case 4: self.init(uuid32: UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3]))
        case 16:
            guard text.count == 32 || text.count == 36 else { return nil }
            self.init(bigEndianBytes: bytes)
        default: return nil
        }
    }

    /// The 16-bit alias, when this UUID is one.
    public var uuid16: UInt16? {
        guard bigEndianBytes[0] == 0, bigEndianBytes[1] == 0, Array(bigEndianBytes[4...]) == Array(Self.base[4...])
        else { return nil }
        return UInt16(bigEndianBytes[2]) << 8 | UInt16(bigEndianBytes[3])
    }

    /// The shortest wire form: 2 bytes for a 16-bit alias, else 16 bytes (least significant first).
    /// ATT never carries 32-bit UUIDs (Core Vol 3 Part F 3.2.1), so those go out as 128-bit.
    public var shortestLittleEndianBytes: [UInt8] {
        if let short = uuid16 { return [UInt8(short & 0xFF), UInt8(short >> 8)] }
        return bigEndianBytes.reversed()
    }

    public var littleEndian128: [UInt8] { bigEndianBytes.reversed() }

    public var description: String {
        if let short = uuid16 {
            let hex = String(short, radix: 16, uppercase: true)
            return String(repeating: "0", count: 4 - hex.count) + hex
        }
        let h = bigEndianBytes.hexString.uppercased()
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-"
            + String(c[20..<32])
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let uuid = BluetoothUUID(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a UUID: \(text)")
        }
        self = uuid
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
