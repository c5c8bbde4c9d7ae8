import BLECore

/// Why an SMP operation failed. Open code space. A ``CodedError``: equality is on the code (the device's own code
/// is in ``returnCode`` or ``groupError``).
public struct SMPError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// No response within the request's timeout, after its retries.
        public static let timeout = Code(rawValue: "timeout")
        /// The link went down (resumable).
        public static let disconnected = Code(rawValue: "disconnected")
        /// This side closed the client.
        public static let closed = Code(rawValue: "closed")
        /// The device answered with an error (`rc`, or `err` in SMP v2): see ``SMPError/returnCode`` and
        /// ``SMPError/groupError``.
        public static let remote = Code(rawValue: "remote")
        /// The device broke SMP: a response to another sequence number, group or command, an offset that goes
        /// backwards or past the end, an undecodable frame, a missing field.
        public static let protocolViolation = Code(rawValue: "protocol-violation")
        /// The device has no SMP service (or no SMP characteristic).
        public static let notSMP = Code(rawValue: "not-smp")
        /// The uploaded image does not match: the device reported `match: false`, or the image the device runs
        /// after the update is not the one sent.
        public static let imageMismatch = Code(rawValue: "image-mismatch")
        /// The device booted back into its previous image: MCUboot reverted the test image or refused it
        /// (invalid signature, downgrade prevention).
        public static let reverted = Code(rawValue: "reverted")
        /// The caller asked for something impossible (an MTU too small for one data byte, an empty image).
        public static let invalidArgument = Code(rawValue: "invalid-argument")
        /// The run stopped at a safe point on request (resumable).
        public static let stopped = Code(rawValue: "stopped")
        /// The task was cancelled.
        public static let cancelled = Code(rawValue: "cancelled")
        public var description: String { rawValue }
    }

    public var code: Code
    public var reason: String
    /// For `.remote`: the generic code (`{"rc": n}`).
    public var returnCode: SMPReturnCode?
    /// For `.remote`: the SMP v2 group error (`{"err": {...}}`).
    public var groupError: SMPGroupError?

    public init(_ code: Code, _ reason: String, returnCode: SMPReturnCode? = nil, groupError: SMPGroupError? = nil) {
        self.code = code
        self.reason = reason
        self.returnCode = returnCode
        self.groupError = groupError
    }

    /// A device refusal of `request`.
    public static func remote(_ status: SMPStatus, request: String) -> SMPError {
        switch status {
        case .ok: return SMPError(.remote, "\(request): success reported as an error")
        case .failed(let rc, let reason):
            let why = reason.map { " (\($0))" } ?? ""
            return SMPError(.remote, "\(request) refused: \(rc)\(why)", returnCode: rc)
        case .groupFailed(let error):
            return SMPError(.remote, "\(request) refused: \(error)", groupError: error)
        }
    }

    public var message: String { reason }

    public var description: String { "\(code): \(reason)" }
}
