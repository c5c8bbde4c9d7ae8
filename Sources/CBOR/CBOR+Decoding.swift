/// RFC 8949 decoding.
///
/// Every item starts with an initial byte: major type (high 3 bits) and additional information (low 5 bits).
/// Additional information 0...23 is the argument itself, 24/25/26/27 announce a 1/2/4/8-byte big-endian argument,
/// 28...30 are reserved (malformed), 31 marks an indefinite length (major types 2...5) or the "break" stop code
/// (major type 7) (§3). Indefinite strings are definite chunks of the same major type (§3.2.3); indefinite maps
/// end with a break in key position only. Simple values 24 with a one-byte value below 32 are malformed (§3.3).
extension CBOR {
    /// The default nesting limit: SMP bodies nest three levels (`{"images": [{...}]}`).
    public static let defaultMaximumDepth = 32

    /// Decodes exactly one item: trailing bytes are an error.
    public init(decoding bytes: [UInt8], maximumDepth: Int = CBOR.defaultMaximumDepth) throws(CBORError) {
        try self.init(decoding: bytes[...], maximumDepth: maximumDepth)
    }

    /// Decodes exactly one item from a slice.
    public init(decoding bytes: ArraySlice<UInt8>, maximumDepth: Int = CBOR.defaultMaximumDepth) throws(CBORError) {
        let (item, used) = try CBOR.decodePrefix(bytes, maximumDepth: maximumDepth)
        guard used == bytes.count else {
            throw CBORError(.trailingBytes, "\(bytes.count - used) byte(s) after the item", offset: used)
        }
        self = item
    }

    /// Decodes the item at the start of `bytes`; returns it with the number of bytes it took.
    public static func decodePrefix(_ bytes: ArraySlice<UInt8>, maximumDepth: Int = CBOR.defaultMaximumDepth)
        throws(CBORError) -> (CBOR, Int)
    {
        var reader = Reader(bytes: bytes, maximumDepth: maximumDepth)
        let item = try reader.item(depth: 0)
        return (item, reader.index - bytes.startIndex)
    }

    struct Reader {
        let bytes: ArraySlice<UInt8>
        let maximumDepth: Int
        var index: Int

        init(bytes: ArraySlice<UInt8>, maximumDepth: Int) {
            self.bytes = bytes
            self.maximumDepth = maximumDepth
            self.index = bytes.startIndex
        }

        var offset: Int { index - bytes.startIndex }
        var remaining: Int { bytes.endIndex - index }

        func truncated(_ what: String) -> CBORError {
            CBORError(.truncated, "input ends inside \(what)", offset: offset)
        }

        func malformed(_ what: String) -> CBORError { CBORError(.malformed, what, offset: offset) }

        mutating func byte(_ what: String) throws(CBORError) -> UInt8 {
            guard index < bytes.endIndex else { throw truncated(what) }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func bigEndian(_ count: Int, _ what: String) throws(CBORError) -> UInt64 {
            guard remaining >= count else { throw truncated(what) }
            var value: UInt64 = 0
            for i in 0..<count { value = value << 8 | UInt64(bytes[index + i]) }
            index += count
            return value
        }

        /// The initial byte and its argument; `argument` is nil for additional information 31.
        mutating func head() throws(CBORError) -> (major: UInt8, info: UInt8, argument: UInt64?) {
            let initial = try byte("an item")
            let major = initial >> 5
            let info = initial & 0x1F
            switch info {
            case 0...23: return (major, info, UInt64(info))
            case 24: return (major, info, try bigEndian(1, "a 1-byte argument"))
            case 25: return (major, info, try bigEndian(2, "a 2-byte argument"))
            case 26: return (major, info, try bigEndian(4, "a 4-byte argument"))
            case 27: return (major, info, try bigEndian(8, "an 8-byte argument"))
            case 31: return (major, info, nil)
            default:
                index -= 1
                throw malformed("reserved additional information \(info)")
            }
        }

        mutating func item(depth: Int) throws(CBORError) -> CBOR {
            let start = index
            let (major, info, argument) = try head()
            switch major {
            case 0, 1:
                guard let n = argument else { throw malformedAt(start, "indefinite length on an integer") }
                return major == 0 ? .unsigned(n) : .negative(n)
            case 2, 3:
                let raw: [UInt8]
                if let n = argument {
                    raw = try definiteString(n, what: major == 2 ? "a byte string" : "a text string")
                } else {
                    raw = try indefiniteString(major: major)
                }
                if major == 2 { return .bytes(raw) }
                guard let text = String(validating: raw, as: UTF8.self) else {
                    throw malformedAt(start, "text string is not valid UTF-8")
                }
                return .text(text)
            case 4:
                try checkDepth(depth, start)
                var items: [CBOR] = []
                if let n = argument {
                    // Every item takes at least one byte: a count beyond what is left cannot be complete yet.
                    guard n <= UInt64(remaining) else { throw truncated("an array of \(n) items") }
                    items.reserveCapacity(Int(n))
                    for _ in 0..<n { items.append(try item(depth: depth + 1)) }
                } else {
                    while try !takeBreak() { items.append(try item(depth: depth + 1)) }
                }
                return .array(items)
            case 5:
                try checkDepth(depth, start)
                var pairs: [Pair] = []
                if let n = argument {
                    guard n <= UInt64(remaining / 2) else { throw truncated("a map of \(n) entries") }
                    pairs.reserveCapacity(Int(n))
                    for _ in 0..<n { pairs.append(Pair(try item(depth: depth + 1), try item(depth: depth + 1))) }
                } else {
                    while try !takeBreak() {
                        let key = try item(depth: depth + 1)
                        if try peekBreak() { throw malformed("break after a map key, before its value") }
                        pairs.append(Pair(key, try item(depth: depth + 1)))
                    }
                }
                return .map(pairs)
            case 6:
                guard let tag = argument else { throw malformedAt(start, "indefinite length on a tag") }
                try checkDepth(depth, start)
                return .tagged(tag, try item(depth: depth + 1))
            default:
                return try simpleOrFloat(info: info, argument: argument, start: start)
            }
        }

        func malformedAt(_ position: Int, _ what: String) -> CBORError {
            CBORError(.malformed, what, offset: position - bytes.startIndex)
        }

        func checkDepth(_ depth: Int, _ start: Int) throws(CBORError) {
            guard depth < maximumDepth else {
                throw CBORError(.tooDeep, "nesting deeper than \(maximumDepth)", offset: start - bytes.startIndex)
            }
        }

        mutating func definiteString(_ n: UInt64, what: String) throws(CBORError) -> [UInt8] {
            guard n <= UInt64(remaining) else { throw truncated("\(what) of \(n) bytes") }
            let count = Int(n)
            defer { index += count }
            return Array(bytes[index..<index + count])
        }

        /// Definite-length chunks of the same major type up to a break (§3.2.3).
        mutating func indefiniteString(major: UInt8) throws(CBORError) -> [UInt8] {
            var out: [UInt8] = []
            while try !takeBreak() {
                let chunkStart = index
                let (chunkMajor, _, argument) = try head()
                guard chunkMajor == major, let n = argument else {
                    throw malformedAt(chunkStart, "an indefinite string chunk must be a definite string of its type")
                }
                out += try definiteString(n, what: "a string chunk")
            }
            return out
        }

        /// Consumes a break (0xFF) if one is next.
        mutating func takeBreak() throws(CBORError) -> Bool {
            guard index < bytes.endIndex else { throw truncated("an indefinite-length item") }
            guard bytes[index] == 0xFF else { return false }
            index += 1
            return true
        }

        func peekBreak() throws(CBORError) -> Bool {
            guard index < bytes.endIndex else { throw truncated("a map entry") }
            return bytes[index] == 0xFF
        }

        func simpleOrFloat(info: UInt8, argument: UInt64?, start: Int) throws(CBORError) -> CBOR {
            guard let value = argument else { throw malformedAt(start, "break outside an indefinite-length item") }
            switch info {
            case 0...23:
                switch value {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                case 23: return .undefined
                default: return .simple(UInt8(value))
                }
            case 24:
                guard value >= 32 else { throw malformedAt(start, "two-byte simple value \(value) below 32") }
                return .simple(UInt8(value))
            case 25: return .half(UInt16(value))
            case 26: return .float(Float(bitPattern: UInt32(value)))
            default: return .double(Double(bitPattern: value))
            }
        }
    }
}
