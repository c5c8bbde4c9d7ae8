import Fleet

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
    /// The database has a newer schema version than this bledfu knows (update bledfu).
    static let databaseNewer: Int32 = 56
    /// A live station of the line already uses this station name.
    static let stationNameTaken: Int32 = 57
    /// The plan's classes or packages differ from those of the line's live stations.
    static let planDiffers: Int32 = 58
    /// A device's attempt (its `exit_code` in the database, not the batch's): its `bledfu flash` printed nothing for
    /// `flash.stall_timeout` and was killed; the attempt is retried like a lost link (the journal resumes it).
    static let flashStalled: Int32 = 59

    static let table: [(Int32, String)] = [
        (0, "every device is done or skipped"),
        (devicesFailed, "at least one device failed (bledfu batch report)"),
        (planInvalid, "the plan is invalid (line and reason printed); nothing connected"),
        (lineStopped, "the line stopped after stop_after_failures failed devices"),
        (databaseError, "the batch database cannot be opened or written (also: a wrong or unreachable database URL)"),
        (noDevices, "no device found"),
        (databaseNewer, "the database has a newer schema version than this bledfu knows"),
        (stationNameTaken, "a live station of the line already uses this --station name"),
        (planDiffers, "the plan's classes or packages differ from the line's"),
        (flashStalled, "a device's attempt: its bledfu flash stopped answering and was killed (the attempt's exit_code)"),
        (BledfuExit.interrupted, "stopped by Ctrl-C; running devices stopped at a safe point (rerun to finish)"),
    ]

    static var helpText: String { "Exit codes:\n" + table.map { "  \($0.0)\t\($0.1)" }.joined(separator: "\n") }
}

extension CLIError {
    /// A batch database failure, with the exit code its cause has (docs/batch.md, "Exit codes").
    init(_ error: BatchLogError) {
        let code: Int32 =
            switch error.code {
            case .newerSchema: BatchExit.databaseNewer
            case .stationNameTaken: BatchExit.stationNameTaken
            case .planDiffers: BatchExit.planDiffers
            default: BatchExit.databaseError
            }
        self.init(error.reason, exitCode: code)
    }
}
