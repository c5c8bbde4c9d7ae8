import BLECore
import CBOR

/// One SMP message: the 8-byte header and its CBOR body (smp-mcuboot.md §2.1). The body is a CBOR map; a header
/// length of 0 means no body (`body == nil`).
public struct SMPMessage: Hashable, Sendable, CustomStringConvertible {
    public var header: SMPHeader
    public var body: CBOR?

    /// `header.length` is set from the body when encoding.
    public init(header: SMPHeader, body: CBOR?) {
        self.header = header
        self.body = body
    }

    public init(
        _ operation: SMPOperation, group: SMPGroup, command: UInt8, sequence: UInt8, version: SMPVersion = .v2,
        body: CBOR? = .map([])
    ) {
        self.init(
            header: SMPHeader(operation: operation, version: version, group: group, sequence: sequence, command: command),
            body: body)
    }

    /// The message's bytes; `indefiniteContainers` writes maps and arrays as Zephyr's zcbor does by default.
    public func encoded(indefiniteContainers: Bool = false) -> [UInt8] {
        let bodyBytes = body?.encoded(indefiniteContainers: indefiniteContainers) ?? []
        var header = self.header
        header.length = UInt16(clamping: bodyBytes.count)
        return header.encoded + bodyBytes
    }

    /// Decodes exactly one message.
    public init(decoding bytes: [UInt8]) throws(SMPDecodingError) {
        try self.init(decoding: bytes[...])
    }

    /// Decodes exactly one message from a slice: truncated when the header or body is incomplete, malformed when
    /// the body is not one CBOR map, trailing bytes when more follows.
    public init(decoding bytes: ArraySlice<UInt8>) throws(SMPDecodingError) {
        let header: SMPHeader
        do {
            header = try SMPHeader(decoding: bytes)
        } catch {
            throw SMPDecodingError(.truncated, "\(bytes.count) byte(s), the SMP header needs 8")
        }
        let total = SMPHeader.size + Int(header.length)
        guard bytes.count >= total else {
            throw SMPDecodingError(.truncated, "body of \(header.length) byte(s), \(bytes.count - SMPHeader.size) present")
        }
        guard bytes.count == total else {
            throw SMPDecodingError(.trailingBytes, "\(bytes.count - total) byte(s) after the message")
        }
        self.header = header
        guard header.length > 0 else {
            body = nil
            return
        }
        let bodyBytes = bytes[(bytes.startIndex + SMPHeader.size)...]
        let item: CBOR
        do {
            item = try CBOR(decoding: bodyBytes)
        } catch {
            // The header's length bounds the body: a CBOR item that needs more is malformed, not truncated.
            throw SMPDecodingError(.malformed, "body is not one CBOR item: \(error)")
        }
        guard case .map = item else { throw SMPDecodingError(.malformed, "body is not a CBOR map: \(item)") }
        body = item
    }

    /// The total length (header + body) of the message starting at `bytes`, once its header is complete.
    public static func frameLength(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= SMPHeader.size else { return nil }
        let i = bytes.startIndex
        return SMPHeader.size + (Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]))
    }

    public var description: String { "\(header) \(body.map(\.description) ?? "(no body)")" }
}

/// Why bytes are not one SMP message. A ``CodedError``: equality is on the code.
public struct SMPDecodingError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let truncated = Code(rawValue: "truncated")
        public static let malformed = Code(rawValue: "malformed")
        public static let trailingBytes = Code(rawValue: "trailing-bytes")
        public var description: String { rawValue }
    }

    public var code: Code
    public var reason: String
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var message: String { reason }
    public var description: String { "SMP \(code): \(reason)" }
}

/// What a response body says about success: the two error forms of smp-mcuboot.md §2.3.
public enum SMPStatus: Hashable, Sendable {
    /// No `rc` (or `rc` 0, which older servers and MCUboot serial recovery send; smp PR #20, smpmgr #37).
    case ok
    /// `{"rc": n}` (SMP v1 for everything, v2 for errors outside a group), with the verbose `rsn` if present.
    case failed(SMPReturnCode, reason: String?)
    /// `{"err": {"group": g, "rc": r}}` (SMP v2), `rc` 0 being success.
    case groupFailed(SMPGroupError)

    /// Reads `rc`, `rsn` and `err` from a response body; other keys are left to the command's decoder.
    public init(body: CBOR?) {
        if let err = body?["err"], let rc = err["rc"]?.intValue, rc != 0 {
            let group = err["group"]?.uint64Value.map { SMPGroup(rawValue: UInt16(truncatingIfNeeded: $0)) }
            self = .groupFailed(SMPGroupError(group: group ?? .os, rc: rc))
        } else if let rc = body?["rc"]?.intValue, rc != 0 {
            self = .failed(SMPReturnCode(rawValue: rc), reason: body?["rsn"]?.textValue)
        } else {
            self = .ok
        }
    }
}
