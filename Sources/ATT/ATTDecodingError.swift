import BLECore

/// Why bytes did not decode as an ATT PDU.
///
/// A struct with an open code space (the swift-asn1 `ASN1Error` shape): match on ``code``, read ``reason`` for the
/// PDU and field. Equality and hashing look at ``code`` only, so tests can compare against a bare code.
///
/// - ``Code/empty``: no bytes at all, so not even an opcode.
/// - ``Code/truncated``: a field needs more bytes than the PDU has left (a fixed field, or the first entry of a list).
/// - ``Code/malformed``: the bytes are all there but do not follow the layout: bytes after a fixed-size PDU, a bad
///   format or length octet, a list that is not a whole number of entries, a UUID that is neither 2 nor 16 octets.
public struct ATTDecodingError: CodedError, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String

        /// A field needs more bytes than remain.
        public static let truncated = Code(name: "truncated")
        /// The bytes are present but violate the PDU's layout.
        public static let malformed = Code(name: "malformed")
        /// Zero bytes: no opcode.
        public static let empty = Code(name: "empty")

        public var description: String { name }
    }

    public var code: Code
    /// Names the PDU and the field: "Read By Type Response: truncated: attribute data list needs 4 byte(s), 2 left".
    public var reason: String
    /// Where the error was raised (`#fileID`), for debugging.
    public var file: String
    public var line: UInt

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// A field of `pdu` ran past the end (worded as ``ByteReader/Truncated`` words it).
    static func truncated(
        _ pdu: ATTOpcode, field: String, needed: Int, available: Int, file: String = #fileID, line: UInt = #line
    ) -> ATTDecodingError {
        ATTDecodingError(
            .truncated, "\(pduName(pdu)): truncated: \(field) needs \(needed) byte(s), \(available) left",
            file: file, line: line)
    }

    /// A read of `pdu`'s parameters by ``ByteReader`` ran past the end.
    static func truncated(
        _ pdu: ATTOpcode, _ truncated: ByteReader.Truncated, file: String = #fileID, line: UInt = #line
    ) -> ATTDecodingError {
        .truncated(
            pdu, field: truncated.field, needed: truncated.needed, available: truncated.available, file: file,
            line: line)
    }

    /// `pdu` breaks its layout; `detail` says how.
    static func malformed(
        _ pdu: ATTOpcode, _ detail: String, file: String = #fileID, line: UInt = #line
    ) -> ATTDecodingError {
        ATTDecodingError(.malformed, "\(pduName(pdu)): malformed: \(detail)", file: file, line: line)
    }

    static func empty(file: String = #fileID, line: UInt = #line) -> ATTDecodingError {
        ATTDecodingError(.empty, "empty PDU: no opcode", file: file, line: line)
    }

    private static func pduName(_ opcode: ATTOpcode) -> String { opcode.name ?? opcode.description }


    /// "ATTDecodingError.truncated: Read Request: truncated: attribute handle needs 2 byte(s), 1 left".
    public var description: String { "ATTDecodingError.\(code): \(reason)" }
}

extension ATTDecodingError.Code: RawRepresentable {
    public init(rawValue: String) { self.init(name: rawValue) }
    public var rawValue: String { name }
}

extension ATTDecodingError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
