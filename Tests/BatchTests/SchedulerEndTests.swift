import BLECore
import Foundation
import Synchronization
import TestDoubles
import Testing

@testable import Batch

/// A batch ends when its last device ends, not at the scheduler's next look for work.
@Suite(.timeLimit(.minutes(2))) struct SchedulerEndTests {
    /// Two devices on two links. The first to finish frees a link with nothing left to claim, so the scheduler
    /// sets up a look for more (after `pollInterval`, on its clock); the second finishing must end the run at once.
    /// The scheduler's clock is manual and never moves: before the fix the run waited for that look (a batch of
    /// devices finishing at different times ended up to a second late: 0.87 s of a 5.1 s six-bracelet wave).
    @Test func theRunEndsWithItsLastDeviceNotItsNextLook() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let clock = ManualClock()
        var scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)]), flasher: FakeFlasher(), log: log)
        scheduler.clock = clock
        let poll = scheduler.pollInterval
        let running = scheduler
        let run = Task { try await running.run(targets: Fixture.targets(2)) }
        // A run still waiting after 30 s of real time waited for its look: the test says so, then moves the clock
        // past the look so that the run (and the test) ends.
        let ended = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                _ = try? await run.value
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(30))
                return false
            }
            let first = await group.next() ?? false
            if !first {
                Issue.record("the run did not end when its last device did: it waited for the scheduler's look for more work")
                clock.advance(by: poll)  // the group ends only with the run
            }
            group.cancelAll()
            return first
        }
        let summary = try await run.value
        #expect(ended)
        #expect(summary.done == 2)
        #expect(clock.now.offset == .zero)
    }
}
