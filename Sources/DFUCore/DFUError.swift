import BLECore

/// Why a family (or the updater) could not go on. One shape for every family, so that the exit-code registry
/// (docs/exit-codes.md) maps a ``Code`` to an exit status whatever the protocol: a family names its failures with
/// the shared codes below, and adds codes of its own only for failures none of them describes.
///
/// Equality is on ``code`` (``CodedError``); ``message`` is one line for people, ``cause`` the lower-level error.
public struct DFUError: CodedError, Sendable {
    /// Open code space (unknown codes survive and print).
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }

        /// The device refused a request (a DFU result code, an SMP `rc`); the message names it.
        public static let remoteRefusal = Code("remote")
        /// Checksums kept failing (CRC mismatch, lost bytes, a failed Validate) and the family gave up.
        public static let verificationFailed = Code("verification-failed")
        /// The device stopped answering within the response timeout (also after reconnecting).
        public static let timeout = Code("timeout")
        /// The link went down (resumable: reconnect, or continue later from the journal).
        public static let linkLost = Code("link-lost")
        /// The device broke its protocol: an unexpected or undecodable answer, an impossible offset.
        public static let protocolViolation = Code("protocol-violation")
        /// Package and device cannot work together, or the package is another family's.
        public static let incompatiblePackage = Code("incompatible-package")
        /// The package itself is malformed or fails verification (``DFUError/cause`` is the package error).
        public static let invalidPackage = Code("invalid-package")
        /// Connecting, or setting up the link (MTU exchange, discovery), failed; the cause says how (an adapter
        /// error: no adapter, permission denied, timed out, refused; an ATT error).
        public static let connection = Code("connection")
        /// The updater (bootloader, or the application after a reset) did not show up where it was expected.
        public static let notFound = Code("not-found")
        /// The connected device speaks no family the updater knows (or not the one asked for), or it is an
        /// application without a way into its updater.
        public static let noUpdateService = Code("no-update-service")
        /// Stopped at a safe point on request (resumable from the journal).
        public static let stopped = Code("stopped")
        /// Cancelled (with `abortOnCancel`, after telling the device to discard the upload).
        public static let cancelled = Code("cancelled")
        /// The link went down before the device acknowledged the step that installs the part: it is installed if
        /// the device comes back running its application, else the upload resumes. The updater decides by looking.
        public static let unconfirmed = Code("unconfirmed")
        /// The device already holds this part (or refuses it as not newer): a part before the last one is skipped.
        public static let alreadyPresent = Code("already-present")
        /// After the reset that should have installed the image, the device runs its old image.
        public static let reverted = Code("reverted")
        /// No family of that name is registered with the updater.
        public static let unknownFamily = Code("unknown-family")
        /// The transport failed in a way that is not a plain disconnect (a write error on the host side).
        public static let transport = Code("transport")
        /// An option the family does not take (a `--mode` of another family, a setting's bad value), refused by
        /// ``DFUFamily/plan(_:options:)`` before anything connects.
        public static let invalidOption = Code("invalid-option")
        /// What the device tells in application mode shows it would refuse the package (another hardware version,
        /// a downgrade, another SoftDevice): refused before the jump, nothing sent, the device still runs its
        /// application (``PackageAssessment``).
        public static let deviceMismatch = Code("device-mismatch")
        /// A bearer wrapper could not start (the CLI's `--capture` file cannot be created or written).
        public static let capture = Code("capture")
        /// Nothing happened for the request's stall limit (no event: no progress, no step, no retry): the updater's
        /// own watchdog ended the update (a hang in the host, the adapter or the kernel). Resumable.
        public static let stalled = Code("stalled")

        public var description: String { rawValue }

        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
    }

    public var code: Code
    public var message: String
    public var cause: (any Error)?
    /// The family that failed, when one did.
    public var family: DFUFamilyID?
    /// Where the device is to be found next, when the family knows (a lost link during a reset, ``Code/unconfirmed``).
    public var location: DeviceLocation?

    public init(
        _ code: Code, _ message: String, cause: (any Error)? = nil, family: DFUFamilyID? = nil,
        location: DeviceLocation? = nil
    ) {
        self.code = code
        self.message = message
        self.cause = cause
        self.family = family
        self.location = location
    }

    /// The error with the family filled in (the updater calls this on what a family throws).
    public func from(_ family: DFUFamilyID) -> DFUError {
        var copy = self
        if copy.family == nil { copy.family = family }
        return copy
    }

    /// A lost link, a timeout or a transport failure: worth a reconnect.
    public var isLinkLoss: Bool { [.linkLost, .timeout, .transport].contains(code) }
}
