import Foundation
import Synchronization
import Testing

@testable import LinuxIO

/// The backstop's thread (LinuxIO's `ProcessBackstop`): it acts once nobody fed it for its limit, on a thread of its
/// own, and never after `stop()`. Its action here records instead of ending the test process.
@Suite(.timeLimit(.minutes(1))) struct ProcessBackstopTests {
    final class Firings: Sendable {
        private let count = Mutex(0)
        func record() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// Waits (on the pool, in steps) until `condition` holds or `timeout` passes.
    static func eventually(_ timeout: Duration, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test func unfedItActsOnce() async {
        let firings = Firings()
        let backstop = ProcessBackstop(limit: .milliseconds(200)) { firings.record() }
        #expect(await Self.eventually(.seconds(20)) { firings.value == 1 })
        #expect(backstop.fired)
        // Once: the thread ends after its action.
        try? await Task.sleep(for: .milliseconds(500))
        #expect(firings.value == 1)
    }

    @Test func itActsEvenWhenNoTaskCanRun() async {
        // The case it is for: every thread of Swift's cooperative pool is blocked (here: one busy task per core,
        // the pool's width, none suspending until the action ran, for at most 20 s). Were the action a task, it
        // could not run before they give up; it runs on the backstop's own thread meanwhile.
        let firings = Firings()
        let backstop = ProcessBackstop(limit: .milliseconds(100)) { firings.record() }
        let width = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let waited = await withTaskGroup(of: Duration.self) { group -> [Duration] in
            for _ in 0..<width {
                group.addTask {
                    let start = ContinuousClock.now
                    let deadline = start.advanced(by: .seconds(20))
                    while firings.value == 0 && ContinuousClock.now < deadline {}  // busy on purpose
                    return start.duration(to: .now)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(firings.value == 1)
        #expect(backstop.fired)
        #expect(waited.allSatisfy { $0 < .seconds(19) }, "\(waited)")
    }

    /// The test's own time for the backstop (its thread looks at it at least once a second).
    final class TestTime: Sendable {
        private let value = Mutex(ContinuousClock.now)
        var now: ContinuousClock.Instant { value.withLock { $0 } }
        func advance(by duration: Duration) { value.withLock { $0 = $0.advanced(by: duration) } }
    }

    @Test func feedingKeepsItQuiet() async throws {
        let firings = Firings()
        let time = TestTime()
        let backstop = ProcessBackstop(limit: .seconds(2), now: { time.now }) { firings.record() }
        // 20 feeds 1.5 s apart (30 s of the backstop's time), each inside its 2 s: no action, however late the
        // test's task runs (its time only moves when the test moves it).
        for _ in 0..<20 {
            time.advance(by: .milliseconds(1500))
            backstop.feed()
            try await Task.sleep(for: .milliseconds(50))
        }
        backstop.stop()
        #expect(firings.value == 0)
        #expect(!backstop.fired)
    }

    @Test func unfedOnItsTimeItActs() async {
        let firings = Firings()
        let time = TestTime()
        let backstop = ProcessBackstop(limit: .seconds(120), now: { time.now }) { firings.record() }
        time.advance(by: .seconds(119))
        try? await Task.sleep(for: .milliseconds(1500))
        #expect(firings.value == 0)
        time.advance(by: .seconds(2))
        #expect(await Self.eventually(.seconds(20)) { firings.value == 1 })
        #expect(backstop.fired)
    }

    @Test func stoppedItNeverActs() async throws {
        let firings = Firings()
        let time = TestTime()
        let backstop = ProcessBackstop(limit: .seconds(2), now: { time.now }) { firings.record() }
        backstop.stop()
        time.advance(by: .seconds(60))
        // The thread looks at least once a second: 1.5 s lets it see the passed limit, and its stop.
        try await Task.sleep(for: .milliseconds(1500))
        #expect(firings.value == 0)
        #expect(!backstop.fired)
    }
}
