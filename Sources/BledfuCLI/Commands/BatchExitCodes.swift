import Batch

extension CLIError {
    /// A batch database failure, with the exit code its cause has (docs/batch.md, "Exit codes").
    init(_ error: BatchLogError) {
        self.init(error.reason, exitCode: ExitCodeRegistry.code(for: error))
    }
}
