import BLECore
import DFUProtocol

/// Why a Secure DFU transfer stopped. Equality is on ``code`` (the reason text is for people).
public struct DFUEngineError: CodedError, Sendable {
    /// Open code space: unknown codes (from a newer engine, a journal, a log) survive and print.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The device answered a request with a failure (see ``DFUEngineError/status``).
        public static let remote = Code(rawValue: "remote")
        /// A checkpoint reported the right offset but a CRC that does not match the local bytes.
        public static let crcMismatch = Code(rawValue: "crc-mismatch")
        /// A checkpoint reported fewer bytes than were sent.
        public static let bytesLost = Code(rawValue: "bytes-lost")
        /// No response within the checkpoint timeout.
        public static let timeout = Code(rawValue: "timeout")
        /// The link went down before the transfer finished (resumable).
        public static let disconnected = Code(rawValue: "disconnected")
        /// The device broke the protocol: unexpected response, impossible offset, tiny MTU, undecodable bytes.
        public static let protocolViolation = Code(rawValue: "protocol-violation")
        /// Package and device cannot work together (init packet larger than the command object, for example).
        public static let incompatible = Code(rawValue: "incompatible")
        /// Too many failed checkpoints, even after slowing down.
        public static let gaveUp = Code(rawValue: "gave-up")
        /// The user (or the caller) stopped the transfer.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The link went down while the last Execute was unacknowledged: the device installed the part if it restarts
        /// into its application; if it is still in its bootloader, the transfer resumes (see docs/engine.md).
        public static let executeUnconfirmed = Code(rawValue: "execute-unconfirmed")
        /// The caller asked to stop (``SecureDFUDriver/requestStop()``) and the engine stopped at a safe point, right
        /// after an executed object: nothing was aborted and the transfer resumes from the journal.
        public static let stopped = Code(rawValue: "stopped")
        /// The transport failed (write error other than a disconnect).
        public static let transport = Code(rawValue: "transport")

        public var description: String { rawValue }
    }

    public var code: Code
    /// One line for people.
    public var reason: String
    /// The device's status for ``Code/remote``.
    public var status: DFUStatus?
    /// The request that the device refused or that timed out.
    public var request: DFUOpcode?

    public init(_ code: Code, _ reason: String, status: DFUStatus? = nil, request: DFUOpcode? = nil) {
        self.code = code
        self.reason = reason
        self.status = status
        self.request = request
    }

    /// A device refusal, named: "Execute (0x04) refused: firmware version too low: device has 3, package has 2".
    public static func remote(
        _ status: DFUStatus, request: DFUOpcode, deviceVersion: UInt32? = nil, packageVersion: UInt32? = nil
    ) -> DFUEngineError {
        var what: String
        switch status {
        case .success: what = "success"
        case .failure(let code): what = code.description
        case .extended(let ext):
            what = ext.description
            if ext == .firmwareVersionFailure {
                let known = [deviceVersion.map { "device has \($0)" }, packageVersion.map { "package has \($0)" }]
                    .compactMap { $0 }
                if !known.isEmpty { what += ": " + known.joined(separator: ", ") }
            }
        }
        return DFUEngineError(.remote, "\(request) refused: \(what)", status: status, request: request)
    }


    public var description: String { "\(code): \(reason)" }
}

extension DFUEngineError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
