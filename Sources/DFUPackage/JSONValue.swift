import Foundation

/// A parsed JSON value (for manifest.json): decoded with Foundation's JSONDecoder, printed like Python's
/// `json.dumps(indent=4, sort_keys=True)` (nrfutil's manifest style, no trailing newline).
public enum JSONValue: Hashable, Sendable, Decodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public var object: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var number: Double? { if case .number(let n) = self { n } else { nil } }

    /// The value as a UInt32 when it is an integral number in range.
    public var uint32: UInt32? {
        guard let n = number, n >= 0, n <= Double(UInt32.max), n.rounded() == n else { return nil }
        return UInt32(n)
    }

    /// Python-style pretty printing: 4-space indent, sorted keys, `", "`-free separators, integers without `.0`.
    public func pythonStyle(indent: Int = 0) -> String {
        let pad = String(repeating: " ", count: indent + 4)
        let close = String(repeating: " ", count: indent)
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .number(let n):
            if n.rounded() == n, abs(n) < 1e15 { return String(Int64(n)) }
            return String(n)
        case .string(let s): return Self.quote(s)
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { pad + $0.pythonStyle(indent: indent + 4) }.joined(separator: ",\n") + "\n\(close)]"
        case .object(let members):
            if members.isEmpty { return "{}" }
            let body = members.keys.sorted().map { key in
                pad + Self.quote(key) + ": " + (members[key] ?? .null).pythonStyle(indent: indent + 4)
            }
            return "{\n" + body.joined(separator: ",\n") + "\n\(close)}"
        }
    }

    private static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value > 0x7E {
                    if scalar.value > 0xFFFF {
                        let v = scalar.value - 0x10000
                        out += String(format: "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
                    } else {
                        out += String(format: "\\u%04x", scalar.value)
                    }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
