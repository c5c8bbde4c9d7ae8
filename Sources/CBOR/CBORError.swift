import BLECore

/// Why bytes are not one CBOR item. Truncated input (a prefix of something that could be well-formed) is told
/// apart from malformed input (RFC 8949 §1.2 "well-formed"), so a reassembler can wait for more bytes in the first
/// case and give up in the second. A ``CodedError``: equality is on ``code``.
public struct CBORError: CodedError, Sendable {
    /// Open code space.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The input ends inside an item: more bytes could complete it.
        public static let truncated = Code(rawValue: "truncated")
        /// Not well-formed: reserved additional information, a misplaced break, a bad string chunk, invalid UTF-8.
        public static let malformed = Code(rawValue: "malformed")
        /// Nested deeper than the decoder's limit (arrays, maps, tags).
        public static let tooDeep = Code(rawValue: "too-deep")
        /// Bytes follow the single item that was asked for.
        public static let trailingBytes = Code(rawValue: "trailing-bytes")
        public var description: String { rawValue }
    }

    public var code: Code
    public var reason: String
    /// Offset of the byte where decoding stopped.
    public var offset: Int

    public init(_ code: Code, _ reason: String, offset: Int) {
        self.code = code
        self.reason = reason
        self.offset = offset
    }

    public var message: String { "at offset \(offset): \(reason)" }
    public var description: String { "CBOR \(code) at offset \(offset): \(reason)" }
}
