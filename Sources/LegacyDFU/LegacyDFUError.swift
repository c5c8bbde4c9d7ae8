import BLECore

/// Why a Legacy DFU transfer stopped. Equality is on ``code`` (the reason text is for people).
public struct LegacyDFUError: CodedError, Sendable {
    /// Open code space: unknown codes (from a newer engine, a journal, a log) survive and print.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The device answered a request with a failure status (see ``LegacyDFUError/status``).
        public static let remote = Code(rawValue: "remote")
        /// The device took fewer bytes than were sent: the image on it is shifted and must be sent again from zero.
        public static let bytesLost = Code(rawValue: "bytes-lost")
        /// The engine reset the device (Reset, `06`) so that the image starts again from zero on a new connection:
        /// after lost packets, a CRC error, or a device still busy with an earlier transfer.
        public static let deviceReset = Code(rawValue: "device-reset")
        /// No answer within the timeout.
        public static let timeout = Code(rawValue: "timeout")
        /// The link went down before the image was activated; Legacy DFU restarts the image from zero.
        public static let disconnected = Code(rawValue: "disconnected")
        /// The link went down before the device acknowledged Activate and Reset: the image is installed if the device
        /// restarts into its application.
        public static let activateUnconfirmed = Code(rawValue: "activate-unconfirmed")
        /// The device broke the protocol: an answer to nothing, an impossible byte count, undecodable bytes.
        public static let protocolViolation = Code(rawValue: "protocol-violation")
        /// Package and device cannot work together (a Secure package, an image type the device does not take).
        public static let incompatible = Code(rawValue: "incompatible")
        /// Too many attempts lost packets or failed validation, even after slowing down.
        public static let gaveUp = Code(rawValue: "gave-up")
        /// The caller cancelled the transfer.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The caller asked to stop and the engine stopped at a safe point (between parts, or before starting).
        public static let stopped = Code(rawValue: "stopped")
        /// The transport failed (a write error other than a disconnect).
        public static let transport = Code(rawValue: "transport")

        public var description: String { rawValue }
    }

    public var code: Code
    /// One line for people.
    public var reason: String
    /// The device's status for ``Code/remote`` (and for a ``Code/deviceReset`` caused by a refusal).
    public var status: LegacyStatus?
    /// The request that the device refused or that timed out.
    public var request: LegacyOpcode?

    public init(_ code: Code, _ reason: String, status: LegacyStatus? = nil, request: LegacyOpcode? = nil) {
        self.code = code
        self.reason = reason
        self.status = status
        self.request = request
    }

    /// Whether a new connection (to the bootloader, or to the application for a new jump) can run the part again
    /// from zero: the link went down, or the engine reset the device on purpose.
    public var restartsFromZero: Bool { [.disconnected, .deviceReset, .bytesLost].contains(code) }


    /// One line for people (``CodedError/message``).
    public var message: String { reason }
}
