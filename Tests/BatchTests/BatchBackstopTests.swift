import Batch
import LinuxIO
import Testing

/// `bledfu batch`'s backstop (`BatchBackstop`): its limit, its line and its exit code. That a `ProcessBackstop`
/// fires on its own thread and ends the process with the status is `TransportTests.ProcessBackstopTests`'.
@Suite(.timeLimit(.minutes(1))) struct BatchBackstopTests {
    /// Three leases, at least two minutes: always longer than the heartbeat's interval (a third of the lease), so a
    /// run that beats never trips it.
    @Test func itsLimitIsThreeLeasesAndAtLeastTwoMinutes() {
        #expect(BatchBackstop.limit(lease: 30) == .seconds(120))
        #expect(BatchBackstop.limit(lease: 1) == .seconds(120))
        #expect(BatchBackstop.limit(lease: 100) == .seconds(300))
        #expect(BatchBackstop.limit(lease: 3600) == .seconds(10_800))
        for lease in [1.0, 30, 100, 3600] {
            #expect(BatchBackstop.limit(lease: lease) > .milliseconds(Int64(lease / 3 * 1000)))
        }
        let backstop = BatchBackstop.start(lease: 30)
        #expect(backstop.limit == .seconds(120))
        backstop.stop()
        #expect(!backstop.fired)
    }

    /// One line naming the limit and how to go on; its own exit code, a batch code.
    @Test func itsLineAndCode() {
        #expect(
            BatchBackstop.lastWords(limit: .seconds(120))
                == "bledfu: error: no heartbeat and no event for 120 s: the run stopped (no task of bledfu runs any more) and "
                + "its backstop ended it; running devices keep their journals: run the same command again\n")
        #expect(BatchExit.stalled == 61)
        let entry = ExitCodeRegistry.entries.first { $0.code == 61 }
        #expect(entry?.name == "batch-stalled" && entry?.scope == .batch)
    }
}
