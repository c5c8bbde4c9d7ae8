/// A cursor over little-endian bytes, as every Bluetooth layer above the PHY lays them out.
///
/// Reads that run past the end throw ``ByteReader/Truncated`` (carrying what was being read), so a codec can tell
/// "not enough bytes" apart from "malformed bytes", which it reports with its own error type.
public struct ByteReader: Sendable {
    /// Thrown when a read needs more bytes than remain.
    public struct Truncated: CodedError, Sendable {
        public struct Code: RawRepresentable, Hashable, Sendable {
            public var rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }
            /// The read needs more bytes than remain.
            public static let truncated = Code(rawValue: "truncated")
        }

        public var code: Code { .truncated }
        /// What was being read (a field name).
        public var field: String
        /// How many bytes the read needed.
        public var needed: Int
        /// How many bytes were left.
        public var available: Int

        public init(field: String, needed: Int, available: Int) {
            self.field = field
            self.needed = needed
            self.available = available
        }

        public var message: String { "\(field) needs \(needed) byte(s), \(available) left" }

    }

    public let bytes: ArraySlice<UInt8>
    public private(set) var index: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes[...]
        self.index = self.bytes.startIndex
    }

    public init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    /// Bytes not yet read.
    public var remainingCount: Int { bytes.endIndex - index }
    public var isAtEnd: Bool { index >= bytes.endIndex }
    /// The offset of the cursor from the first byte.
    public var offset: Int { index - bytes.startIndex }

    public mutating func readUInt8(_ field: String) throws(Truncated) -> UInt8 {
        try need(1, field)
        defer { index += 1 }
        return bytes[index]
    }

    public mutating func readUInt16(_ field: String) throws(Truncated) -> UInt16 {
        try need(2, field)
        defer { index += 2 }
        return UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
    }

    public mutating func readUInt32(_ field: String) throws(Truncated) -> UInt32 {
        try need(4, field)
        var value: UInt32 = 0
        for i in 0..<4 { value |= UInt32(bytes[index + i]) << (8 * UInt32(i)) }
        index += 4
        return value
    }

    public mutating func readUInt64(_ field: String) throws(Truncated) -> UInt64 {
        try need(8, field)
        var value: UInt64 = 0
        for i in 0..<8 { value |= UInt64(bytes[index + i]) << (8 * UInt64(i)) }
        index += 8
        return value
    }

    public mutating func readBytes(_ count: Int, _ field: String) throws(Truncated) -> [UInt8] {
        try need(count, field)
        defer { index += count }
        return Array(bytes[index..<index + count])
    }

    /// Everything that remains (possibly nothing).
    public mutating func readRemaining() -> [UInt8] {
        defer { index = bytes.endIndex }
        return Array(bytes[index...])
    }

    public func peekUInt8() -> UInt8? {
        isAtEnd ? nil : bytes[index]
    }

    private func need(_ count: Int, _ field: String) throws(Truncated) {
        guard count >= 0, remainingCount >= count else {
            throw Truncated(field: field, needed: count, available: remainingCount)
        }
    }
}

/// Appends little-endian fields to a byte array.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 0) {
        self.bytes = []
        self.bytes.reserveCapacity(capacity)
    }

    public mutating func write(_ value: UInt8) { bytes.append(value) }

    public mutating func write(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    public mutating func write(_ value: UInt32) {
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    public mutating func write(_ value: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    public mutating func write<S: Sequence>(contentsOf other: S) where S.Element == UInt8 {
        bytes.append(contentsOf: other)
    }
}

extension Array where Element == UInt8 {
    /// Lower-case hex without separators ("0a1b").
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses hex ("0a1b", "0A 1B", "0a:1b"); nil on any other character or an odd digit count.
    public init?(hexString text: String) {
        var out: [UInt8] = []
        var high: UInt8?
        for scalar in text.unicodeScalars {
            if scalar == " " || scalar == ":" || scalar == "-" || scalar == "\n" || scalar == "\t" { continue }
            guard let nibble = Self.nibble(scalar) else { return nil }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        guard high == nil else { return nil }
        self = out
    }

    private static func nibble(_ scalar: Unicode.Scalar) -> UInt8? {
        switch scalar.value {
        case 0x30...0x39: return UInt8(scalar.value - 0x30)
        case 0x41...0x46: return UInt8(scalar.value - 0x41 + 10)
        case 0x61...0x66: return UInt8(scalar.value - 0x61 + 10)
        default: return nil
        }
    }
}
