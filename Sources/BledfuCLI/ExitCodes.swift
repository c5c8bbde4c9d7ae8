import ArgumentParser
import Batch
import BLECore
import DFUCore
import DFUPackage
import DFUSimulator
import GATT

/// An error the CLI reports as one line with its exit code. Its ``code`` is the exit code's name in
/// ``ExitCodeRegistry`` ("no-adapter", "usage").
public struct CLIError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
    }

    public var code: Code { Code(rawValue: ExitCodeRegistry.name(of: exitCode)) }
    public var message: String
    public var exitCode: Int32

    public init(_ message: String, exitCode: Int32) {
        self.message = message
        self.exitCode = exitCode
    }

    public init(_ error: AdapterError) {
        self.init(error.reason, exitCode: BledfuExit.code(for: error))
    }

    public var description: String { message }
}

extension ExitCodeRegistry {
    /// `bledfu simulate`'s set-up errors: a profile, override, key or fault plan the command line names is a usage
    /// error unless the registry names its code.
    static func code(for error: SimulatorError) -> Int32 {
        byError["SimulatorError.\(error.code.rawValue)"] ?? code("usage")
    }
}
