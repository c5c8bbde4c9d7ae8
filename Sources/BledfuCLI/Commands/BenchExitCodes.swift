import Batch
import Bench
import DFUCore
import DFUSimulator

extension ExitCodeRegistry {
    /// `bledfu bench batch`'s errors: a profile or a sample package that does not load ends in its cause's code;
    /// the others in their registry row (`BenchError.CODE`).
    static func code(for error: BenchError) -> Int32 {
        switch error.cause {
        case let simulator as SimulatorError where error.code == .profile: code(for: simulator)
        case let update as DFUError where error.code == .package: code(for: update)
        default: byError["BenchError.\(error.code.rawValue)"] ?? failure
        }
    }
}

extension CLIError {
    /// A bench error as the CLI reports it: its message and its registry code.
    init(_ error: BenchError) {
        self.init(error.message, exitCode: ExitCodeRegistry.code(for: error))
    }
}
