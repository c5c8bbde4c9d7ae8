/// One CBOR data item (RFC 8949 §3), as decoded or to be encoded.
///
/// Every well-formed item has a value here, so decoding and encoding are symmetric: `encode(decode(b)) == b` for
/// items in preferred serialization (RFC 8949 §4.1: shortest argument, definite lengths), and
/// `decode(encode(v)) == v` for every value. Maps keep their entries in order, duplicates and unknown keys included
/// (SMP hosts must keep what they do not understand). Floats keep their width (half, single, double) so that they
/// re-encode to the same bytes.
public indirect enum CBOR: Hashable, Sendable {
    /// Major type 0: 0...2^64-1.
    case unsigned(UInt64)
    /// Major type 1: the value -1 - n.
    case negative(UInt64)
    /// Major type 2.
    case bytes([UInt8])
    /// Major type 3 (valid UTF-8).
    case text(String)
    /// Major type 4.
    case array([CBOR])
    /// Major type 5, in wire order.
    case map([Pair])
    /// Major type 6: tag number and content.
    case tagged(UInt64, CBOR)
    /// Major type 7, values 20 and 21.
    case bool(Bool)
    /// Major type 7, value 22.
    case null
    /// Major type 7, value 23.
    case undefined
    /// Major type 7, other simple values (0...19, 32...255).
    case simple(UInt8)
    /// Major type 7, additional information 25: IEEE 754 binary16, kept as its bits.
    case half(UInt16)
    /// Major type 7, additional information 26: binary32.
    case float(Float)
    /// Major type 7, additional information 27: binary64.
    case double(Double)

    /// One map entry.
    public struct Pair: Hashable, Sendable {
        public var key: CBOR
        public var value: CBOR
        public init(_ key: CBOR, _ value: CBOR) {
            self.key = key
            self.value = value
        }
    }

    /// A map with text keys, in the order given.
    public static func textMap(_ entries: KeyValuePairs<String, CBOR>) -> CBOR {
        .map(entries.map { Pair(.text($0.key), $0.value) })
    }

    /// An integer as major type 0 or 1.
    public static func int(_ value: Int) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1)))
    }
}

extension CBOR {
    /// The value of the first entry whose key is the text `key` (SMP maps use text keys), when this is a map.
    public subscript(key: String) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.key == .text(key) }?.value
    }

    /// The entries of a map (nil for other items).
    public var mapPairs: [Pair]? {
        if case .map(let pairs) = self { return pairs }
        return nil
    }

    /// The elements of an array (nil for other items).
    public var arrayValue: [CBOR]? {
        if case .array(let items) = self { return items }
        return nil
    }

    /// An integer that fits `Int` (nil for other items and for integers out of range).
    public var intValue: Int? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }

    /// A non-negative integer.
    public var uint64Value: UInt64? {
        if case .unsigned(let n) = self { return n }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var textValue: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }
}

extension CBOR: CustomStringConvertible {
    /// RFC 8949 §8 diagnostic notation (`{"off": 512, "sha": h'0a1b'}`).
    public var description: String {
        switch self {
        case .unsigned(let n): return String(n)
        case .negative(let n): return n == UInt64.max ? "-18446744073709551616" : "-\(n + 1)"
        case .bytes(let b): return "h'" + b.map { String($0, radix: 16).leftPadded(2) }.joined() + "'"
        case .text(let s): return "\"" + s.replacingQuotes + "\""
        case .array(let items): return "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .map(let pairs): return "{" + pairs.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .tagged(let tag, let item): return "\(tag)(\(item))"
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .undefined: return "undefined"
        case .simple(let v): return "simple(\(v))"
        case .half(let bits): return "half(0x\(String(bits, radix: 16)))"
        case .float(let f): return "\(f)_2"
        case .double(let d): return "\(d)_3"
        }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }

    fileprivate var replacingQuotes: String {
        var out = ""
        for ch in self {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            default: out.append(ch)
            }
        }
        return out
    }
}
