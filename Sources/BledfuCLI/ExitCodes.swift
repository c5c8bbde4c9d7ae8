import ArgumentParser
import Batch
import BLECore
import DFUCore
import DFUPackage
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
