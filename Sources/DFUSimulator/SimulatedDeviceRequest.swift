import BLECore

/// Why the simulator's devices could not be set up from what the command line names (a profile, an override, a
/// key, a fault plan, a status directory). `bledfu simulate` prints ``message`` and ends with the exit code its
/// ``code`` maps to in the CLI's exit-code registry.
public struct SimulatorError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A `--device` that is not NAME[:COUNT] with a COUNT of 1 to 64.
        public static let invalidRequest = Code(rawValue: "invalid-request")
        /// No profile of that name (in the Firmware directory nor built in), or its file cannot be read.
        public static let unknownProfile = Code(rawValue: "unknown-profile")
        /// The profile's JSON does not decode.
        public static let invalidProfile = Code(rawValue: "invalid-profile")
        /// A profile of a family this use does not take (a Legacy profile where Secure DFU is needed, an unknown
        /// `family`).
        public static let wrongFamily = Code(rawValue: "wrong-family")
        /// An override that does not apply to the device (a Secure DFU option for an SMP device).
        public static let invalidOverride = Code(rawValue: "invalid-override")
        /// A `--public-key` file that is no PEM key.
        public static let invalidKey = Code(rawValue: "invalid-key")
        /// Two devices would advertise at one address.
        public static let addressCollision = Code(rawValue: "address-collision")
        /// A `--fault` item or `--fault-plan` file that does not parse.
        public static let invalidFaultPlan = Code(rawValue: "invalid-fault-plan")
        /// A central adapter's controller profile could not be written to the radio directory.
        public static let controllerUnwritable = Code(rawValue: "controller-unwritable")
        /// No status directory, or no status file of the device asked for.
        public static let noStatus = Code(rawValue: "no-status")
        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String
    public var cause: (any Error)?

    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { message }
}

/// `--device NAME[:COUNT]`: a profile in Firmware/ (or a path to a profile JSON) and how many instances to run.
public struct SimulatedDeviceRequest: Hashable, Sendable {
    public var name: String
    public var count: Int

    /// Parses "bracelet", "sensor:4", "./my.json", "/abs/profile.json:2".
    public init(parsing text: String) throws(SimulatorError) {
        var name = text
        var count = 1
        if let colon = text.lastIndex(of: ":"), let value = Int(text[text.index(after: colon)...]) {
            name = String(text[..<colon])
            count = value
        }
        guard !name.isEmpty else { throw SimulatorError(.invalidRequest, "--device '\(text)': expected NAME[:COUNT]") }
        guard (1...64).contains(count) else {
            throw SimulatorError(.invalidRequest, "--device '\(text)': COUNT must be 1 to 64")
        }
        self.name = name
        self.count = count
    }

    /// A path (contains '/' or ends in .json) rather than a profile name.
    public var isPath: Bool { name.contains("/") || name.hasSuffix(".json") }
}
