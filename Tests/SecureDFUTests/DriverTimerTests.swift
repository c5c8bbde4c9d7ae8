import GATT
import TestDoubles
import Testing

@testable import SecureDFU

/// `DriverTimer`: one sleeping task serves consecutive timers; a new one starts only for a timer due earlier.
@Suite(.timeLimit(.minutes(5))) struct DriverTimerTests {
    typealias Instant = ManualClock.Instant
    let start = ManualClock().now

    @Test func laterTimersRideOnTheSleepingTask() {
        let timers = DriverTimer<Instant>()
        // The first timer needs a task; the next ones, due no earlier, do not.
        #expect(timers.arm(DFUTimer(id: 1), at: start.advanced(by: .seconds(10))))
        #expect(!timers.arm(DFUTimer(id: 2), at: start.advanced(by: .seconds(10))))
        #expect(!timers.arm(DFUTimer(id: 3), at: start.advanced(by: .seconds(12))))
        // The task wakes at 10 s: timer 3 is armed, due at 12 s, so it sleeps on; at 12 s it fires timer 3 only.
        guard case .sleep(let until) = timers.woke(now: start.advanced(by: .seconds(10))) else {
            Issue.record("expected to sleep on")
            return
        }
        #expect(until == start.advanced(by: .seconds(12)))
        guard case .fire(let due) = timers.woke(now: start.advanced(by: .seconds(12))) else {
            Issue.record("expected timer 3 to fire")
            return
        }
        #expect(due == DFUTimer(id: 3))
        // Fired: the next timer needs a new task.
        #expect(timers.arm(DFUTimer(id: 4), at: start.advanced(by: .seconds(20))))
    }

    @Test func anEarlierTimerGetsATaskOfItsOwn() {
        let timers = DriverTimer<Instant>()
        #expect(timers.arm(DFUTimer(id: 1), at: start.advanced(by: .seconds(10))))
        // A prepare delay of 40 ms after a 10 s checkpoint timeout: due before the sleeper wakes.
        #expect(timers.arm(DFUTimer(id: 2), at: start.advanced(by: .milliseconds(40))))
        guard case .fire(let due) = timers.woke(now: start.advanced(by: .milliseconds(40))) else {
            Issue.record("expected timer 2 to fire")
            return
        }
        #expect(due == DFUTimer(id: 2))
        // The older task, if it still wakes, finds nothing armed and ends.
        guard case .idle = timers.woke(now: start.advanced(by: .seconds(10))) else {
            Issue.record("expected nothing to fire")
            return
        }
    }
}
