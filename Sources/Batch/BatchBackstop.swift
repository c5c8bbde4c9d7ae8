import LinuxIO

/// The last resort behind the line's own deadlines: a thread outside Swift's cooperative pool (LinuxIO's
/// ``ProcessBackstop``) that ends `bledfu batch` when the run itself stopped. Every wait of the scheduler has a
/// deadline (each child its stall watchdog, the heartbeat its interval), but those deadlines are tasks: when every
/// thread of the pool is blocked (as `bledfu flash` once was after the jump: docs/vm-test.md), none of them runs
/// again. The scheduler beats every `lease / 3` s whatever the devices do and reports every device's progress, so
/// a run that does neither for ``limit(lease:)`` has stopped. Exiting closes the children's event pipes, so each
/// `bledfu flash` child stops at once (its journal kept), as when the lease is lost.
public enum BatchBackstop {
    /// Three leases without a heartbeat or an event, and never less than two minutes (a heartbeat is a write to the
    /// line's database, which may be slow but answers within its own timeouts).
    public static func limit(lease: Double) -> Duration {
        .milliseconds(Int64(max(120, 3 * lease) * 1000))
    }

    /// A running backstop: feed it on every heartbeat and event, stop it when the scheduler returns.
    public static func start(lease: Double) -> ProcessBackstop {
        let limit = limit(lease: lease)
        return ProcessBackstop(limit: limit, exitStatus: BatchExit.stalled) { ("", lastWords(limit: limit)) }
    }

    /// The one line it leaves on standard error, written without the program's console (its lock may be what blocks).
    public static func lastWords(limit: Duration) -> String {
        "bledfu: error: no heartbeat and no event for \(limit.components.seconds) s: the run stopped (no task of bledfu "
            + "runs any more) and its backstop ended it; running devices keep their journals: run the same command again\n"
    }
}
