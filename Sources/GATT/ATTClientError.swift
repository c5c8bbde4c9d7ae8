import ATT
import BLECore

/// Why an ATT client operation failed. The code space is open (a `Code` is a named value), and the remote ATT error
/// travels with its request opcode and handle, so `0xFD` or an application code `0x80…0x9F` prints as received.
public struct ATTClientError: CodedError, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public init(_ name: String) { self.name = name }
        /// No response within the ATT transaction timeout; the bearer was closed.
        public static let timeout = Code("timeout")
        /// The peer closed the link or the link was lost.
        public static let disconnected = Code("disconnected")
        /// The peer answered with an Error Response (`attError`, `requestOpcode`, `handle` are set).
        public static let remote = Code("remote")
        /// The peer broke an ATT bearer rule (unexpected response, malformed GATT data); the bearer was closed.
        public static let protocolViolation = Code("protocolViolation")
        /// This side closed the client.
        public static let closed = Code("closed")
        /// An incoming PDU could not be decoded; the bearer was closed.
        public static let decoding = Code("decoding")
        /// The peer sent a PDU longer than ATT_MTU (Core v5.4 Vol 3 Part F §3.2.8: ATT_MTU is the maximum size of
        /// any packet sent between client and server); the bearer was closed.
        public static let oversizePDU = Code("oversizePDU")
        /// The caller asked for something this API cannot do (a command passed to `request`, a value too long,
        /// notifications on a characteristic without a CCCD).
        public static let invalidArgument = Code("invalidArgument")
        public var description: String { name }
    }

    public var code: Code
    public var reason: String
    /// For `.remote`: the ATT error code the peer sent.
    public var attError: ATTErrorCode?
    /// For `.remote`: the opcode of the request the peer refused.
    public var requestOpcode: ATTOpcode?
    /// For `.remote`: the attribute handle in the Error Response.
    public var handle: UInt16?

    public init(_ code: Code, _ reason: String = "") {
        self.code = code
        self.reason = reason
    }

    /// An Error Response from the peer.
    public static func remote(_ error: ATTErrorCode, _ requestOpcode: ATTOpcode, _ handle: UInt16) -> ATTClientError {
        var result = ATTClientError(.remote, "Error Response")
        result.attError = error
        result.requestOpcode = requestOpcode
        result.handle = handle
        return result
    }

    /// Maps a bearer failure: a peer disconnect stays `.disconnected`, our own close is `.closed`.
    public init(bearer error: BearerError) {
        switch error.code {
        case .closed: self.init(.closed, error.description)
        case .disconnected: self.init(.disconnected, error.description)
        case .timeout: self.init(.timeout, error.description)
        default: self.init(.disconnected, "bearer failed: \(error)")
        }
    }

    public var description: String {
        if code == .remote, let attError {
            let handleText = handle.map { " handle 0x" + String($0, radix: 16, uppercase: true) } ?? ""
            let opText = requestOpcode.map { " to \($0)" } ?? ""
            return "remote ATT error \(attError)\(opText)\(handleText)"
        }
        return reason.isEmpty ? "\(code)" : "\(code): \(reason)"
    }
}

extension ATTClientError.Code: RawRepresentable {
    public init(rawValue: String) { self.init(rawValue) }
    public var rawValue: String { name }
}

extension ATTClientError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
