import BLECore
/// Why a DFU package, an init packet or a verification was rejected.
///
/// One line (``message``) names the cause; ``code`` is an open code space (bledfu's exit-code registry maps each
/// code to a documented exit status, docs/exit-codes.md). Equality compares the code only.
public struct PackageError: CodedError, Sendable {
    /// The kind of failure. Unknown raw values survive and print as `code(N)`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        /// The container is not a readable zip archive (truncated, garbage, no central directory).
        public static let invalidArchive = Code(rawValue: 1)
        /// An entry name is unsafe (`..`, absolute path, backslash) or appears twice.
        public static let unsafeEntry = Code(rawValue: 2)
        /// An entry is larger than the bound, or its compression ratio is absurd (zip bomb).
        public static let entryTooLarge = Code(rawValue: 3)
        /// An entry failed its CRC-32 check or could not be inflated.
        public static let corruptEntry = Code(rawValue: 4)
        /// No `manifest.json`, or it is not valid JSON of the expected shape.
        public static let invalidManifest = Code(rawValue: 5)
        /// The manifest names a file that is not in the archive.
        public static let missingFile = Code(rawValue: 6)
        /// An init packet (`.dat`) does not decode.
        public static let invalidInitPacket = Code(rawValue: 7)
        /// An image does not match its init packet (hash, CRC16, size, type).
        public static let imageMismatch = Code(rawValue: 8)
        /// An init-packet signature does not verify with any given key.
        public static let signatureInvalid = Code(rawValue: 9)
        /// A key file could not be read or parsed.
        public static let invalidKey = Code(rawValue: 10)
        /// A create input (bin/hex file, option combination) is invalid.
        public static let invalidInput = Code(rawValue: 11)
        /// Reading or writing a file failed.
        public static let io = Code(rawValue: 12)
        /// The create options are missing one the package needs or combine ones that do not go together (a usage
        /// error: `bledfu package create` exits 64).
        public static let invalidOptions = Code(rawValue: 13)

        public var description: String {
            switch self {
            case .invalidArchive: "invalid-archive"
            case .unsafeEntry: "unsafe-entry"
            case .entryTooLarge: "entry-too-large"
            case .corruptEntry: "corrupt-entry"
            case .invalidManifest: "invalid-manifest"
            case .missingFile: "missing-file"
            case .invalidInitPacket: "invalid-init-packet"
            case .imageMismatch: "image-mismatch"
            case .signatureInvalid: "signature-invalid"
            case .invalidKey: "invalid-key"
            case .invalidInput: "invalid-input"
            case .io: "io"
            case .invalidOptions: "invalid-options"
            default: "code(\(rawValue))"
            }
        }
    }

    public var code: Code
    /// One line naming the cause, e.g. "application: init packet hash does not match app.bin (SHA-256 …)".
    public var message: String
    public var file: String
    public var line: Int

    public init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String { message }

}
