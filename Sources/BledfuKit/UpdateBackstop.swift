import DFUCore
import LinuxIO

/// The last resort behind the update's watchdog (``StallGuard``): a thread outside Swift's cooperative pool
/// (LinuxIO's ``ProcessBackstop``) that ends the process when even the watchdog could not end a stalled update.
/// The watchdog is a task; when every thread of the pool is blocked (docs/vm-test.md, "The hang after the jump"), no
/// task runs, the watchdog included. A program feeds it with every event of the update and stops it at the end.
public enum UpdateBackstop {
    /// How much longer than the stall limit the backstop waits: the watchdog's grace for a cancelled flow
    /// (``StallGuard/grace``) and the run's own end.
    public static let margin: Duration = StallGuard.grace + .seconds(10)

    /// A running backstop for an update whose stall limit is `stallLimit` (nil: the watchdog is off, so is the
    /// backstop): past `stallLimit` + ``margin`` without a feed it writes ``lastWords(stallLimit:exitStatus:json:elapsed:)``
    /// and exits with `exitStatus` (the exit-code registry's `stalled`).
    public static func start(stallLimit: Duration?, exitStatus: Int32, json: Bool) -> ProcessBackstop? {
        guard let stallLimit, stallLimit > .zero else { return nil }
        let started = ContinuousClock.now
        return ProcessBackstop(limit: stallLimit + margin, exitStatus: exitStatus) {
            lastWords(stallLimit: stallLimit, exitStatus: exitStatus, json: json, elapsed: started.duration(to: .now))
        }
    }

    /// What the backstop leaves: the error line for standard error and, with `json`, the result record for standard
    /// output, the same record type a `--json` run ends with (a batch reads it back), written without the program's
    /// renderer (its lock may be what blocks).
    public static func lastWords(stallLimit: Duration, exitStatus: Int32, json: Bool, elapsed: Duration)
        -> (standardOutput: String, standardError: String)
    {
        let message =
            "nothing happened for \(UpdateFlow.seconds(stallLimit)) s and the update did not end (no task of bledfu "
            + "runs any more); its backstop ended it (--stall-timeout); the upload is resumable"
        let errorLine = "bledfu: error: \(message)\n"
        guard json else { return ("", errorLine) }
        var summary = UpdateSummary(success: false, exitCode: Int(exitStatus), statistics: UpdateStatistics(), message: message)
        summary.error = DFUError.Code.stalled.rawValue
        let (seconds, attoseconds) = elapsed.components
        summary.seconds = Double(seconds) + Double(attoseconds) / 1e18
        return (JSONLine.text(UpdateEventRecord(.result(summary))) ?? "", errorLine)
    }
}
