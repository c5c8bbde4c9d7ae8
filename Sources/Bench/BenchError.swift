import BLECore

/// Why a batch bench (``BatchBench``), its grid (``BatchGrid``) or a device bench (``DeviceBench``) could not
/// measure. The CLI maps each code to an exit status through the registry (`BenchError.CODE` rows of
/// `ExitCodeRegistry`); ``Code/profile`` and ``Code/package`` end in their cause's code.
public struct BenchError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// No Firmware/ directory: it holds the sample packages the bench flashes (`BLEDFU_FIRMWARE_DIR`).
        public static let noFirmware = Code(rawValue: "no-firmware")
        /// A `--grid`, `--grid-adapters` or `--grid-profiles` value that does not parse.
        public static let invalidGrid = Code(rawValue: "invalid-grid")
        /// The device profile does not load (its cause: the `SimulatorError`).
        public static let profile = Code(rawValue: "profile")
        /// The profile's sample package does not read or plan (its cause: the `DFUError`).
        public static let package = Code(rawValue: "package")
        /// The run's scratch directory (radio, journals, batch log) cannot be created.
        public static let scratch = Code(rawValue: "scratch")
        /// `bledfu simulate` did not start.
        public static let simulatorStart = Code(rawValue: "simulator-start")
        /// `bledfu simulate` exited before its devices advertised, or did not report them ready in time.
        public static let simulatorStopped = Code(rawValue: "simulator-stopped")
        /// A `bench --device` run's `bledfu flash` child could not be started.
        public static let flashStart = Code(rawValue: "flash-start")
        /// The run's batch log could not be opened or written.
        public static let database = Code(rawValue: "database")
        /// Not every device of the run was flashed.
        public static let devicesFailed = Code(rawValue: "devices-failed")
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
}
