#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A family's resume state as it sits in a protocol-neutral journal: a JSON value. A family keeps its own
/// `Codable` type (Secure DFU: the executed objects; SMP: the image SHA-256 and length) and converts with
/// ``init(_:)`` and ``decode(_:)``; the updater stores the value without looking inside.
public enum ResumePayload: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([ResumePayload])
    case object([String: ResumePayload])

    /// A family's state as a payload.
    public init<T: Encodable>(_ value: T) throws(JournalError) {
        do {
            let data = try JSONEncoder().encode(value)
            self = try JSONDecoder().decode(ResumePayload.self, from: data)
        } catch {
            throw JournalError(.unreadable, "cannot encode \(T.self): \(error)", cause: error)
        }
    }

    /// The payload as a family's state type.
    public func decode<T: Decodable>(_ type: T.Type) throws(JournalError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: JSONEncoder().encode(self))
        } catch {
            throw JournalError(.unreadable, "journal payload is not a \(T.self): \(error)", cause: error)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([ResumePayload].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: ResumePayload].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
