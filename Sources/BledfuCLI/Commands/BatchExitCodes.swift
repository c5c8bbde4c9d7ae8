/// `bledfu batch` exit codes (50-59), documented in docs/batch.md. 0 means every device is done or skipped.
enum BatchExit {
    /// The run finished and at least one device failed (see `bledfu batch report`).
    static let devicesFailed: Int32 = 50
    /// The plan was rejected before anything connected (the message names the line).
    static let planInvalid: Int32 = 51
    /// The line stopped after `stop_after_failures` failed devices; the rest stay pending.
    static let lineStopped: Int32 = 52
    /// The database could not be opened or written.
    static let databaseError: Int32 = 53
    /// The plan's discovery found no device and the plan lists none.
    static let noDevices: Int32 = 54
    /// `bench batch`: the parallel run took longer than `--max-ratio` times the single run.
    static let benchGoalMissed: Int32 = 55
    /// A device's attempt (its `exit_code` in the database, not the batch's): its `bledfu flash` printed nothing for
    /// `flash.stall_timeout` and was killed; the attempt is retried like a lost link (the journal resumes it).
    static let flashStalled: Int32 = 56

    static let table: [(Int32, String)] = [
        (0, "every device is done or skipped"),
        (devicesFailed, "at least one device failed (bledfu batch report)"),
        (planInvalid, "the plan is invalid (line and reason printed); nothing connected"),
        (lineStopped, "the line stopped after stop_after_failures failed devices"),
        (databaseError, "the batch database cannot be opened or written"),
        (noDevices, "no device found"),
        (flashStalled, "a device's attempt: its bledfu flash stopped answering and was killed (the attempt's exit_code)"),
        (BledfuExit.interrupted, "stopped by Ctrl-C; running devices stopped at a safe point (rerun to finish)"),
    ]

    static var helpText: String { "Exit codes:\n" + table.map { "  \($0.0)\t\($0.1)" }.joined(separator: "\n") }
}
