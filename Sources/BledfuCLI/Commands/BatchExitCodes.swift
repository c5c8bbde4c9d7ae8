import Batch

/// `bledfu batch` exit codes (the registry's entries of scope `batch`), documented in docs/batch.md. 0 means every device is done or skipped.
enum BatchExit {
    /// The run finished and at least one device failed (see `bledfu batch report`).
    static let devicesFailed = ExitCodeRegistry.code("batch-devices-failed")
    /// The plan was rejected before anything connected (the message names the line).
    static let planInvalid = ExitCodeRegistry.code("batch-plan-invalid")
    /// The line stopped after `stop_after_failures` failed devices; the rest stay pending.
    static let lineStopped = ExitCodeRegistry.code("batch-line-stopped")
    /// The database could not be opened or written.
    static let databaseError = ExitCodeRegistry.code("batch-database")
    /// The plan's discovery found no device and the plan lists none.
    static let noDevices = ExitCodeRegistry.code("batch-no-devices")
    /// `bench batch`: the parallel run took longer than `--max-ratio` times the single run.
    static let benchGoalMissed = ExitCodeRegistry.code("bench-goal-missed")
    /// The database has a newer schema version than this bledfu knows (update bledfu).
    static let databaseNewer = ExitCodeRegistry.code("batch-database-newer")
    /// A live station of the line already uses this station name.
    static let stationNameTaken = ExitCodeRegistry.code("batch-station-name-taken")
    /// The plan's classes or packages differ from those of the line's live stations.
    static let planDiffers = ExitCodeRegistry.code("batch-plan-differs")
    /// A device's attempt (its `exit_code` in the database, not the batch's): its `bledfu flash` printed nothing for
    /// `flash.stall_timeout` and was killed; the attempt is retried like a lost link (the journal resumes it).
    static let flashStalled = ExitCodeRegistry.code("flash-stalled")
    /// An adapter disappeared mid-batch (USB pulled, ENODEV; a virtual radio's directory removed) and devices are
    /// left pending with no adapter to run them.
    static let adapterGone = ExitCodeRegistry.code("batch-adapter-gone")

    /// The codes `batch` ends with (and a device attempt's own), as the registry words them.
    static let table: [(Int32, String)] = ExitCodeRegistry.entries
        .filter { !$0.scope.isDisjoint(with: [.batch, .batchAttempt]) }
        .map { ($0.code, $0.meaning) }

    static var helpText: String { "Exit codes:\n" + table.map { "  \($0.0)\t\($0.1)" }.joined(separator: "\n") }
}

extension CLIError {
    /// A batch database failure, with the exit code its cause has (docs/batch.md, "Exit codes").
    init(_ error: BatchLogError) {
        self.init(error.reason, exitCode: ExitCodeRegistry.code(for: error))
    }
}
