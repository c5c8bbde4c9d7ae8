import GATT
import Synchronization

/// A manual clock on which short sleeps pass at once: a sleep of at most ``limit`` (the pacing's prepare delay after
/// Create Data, at most 1 s in ``AdaptiveStreamPacing``) moves time to its deadline and returns, and is recorded in
/// ``pauses``. Longer sleeps (request and checkpoint timeouts, 10 s by default) wait for ``advance(by:)`` as on
/// ``ManualClock``. So a test runs the default pacing through the injected clock without a real wait.
final class AutoPauseClock: Clock, Sendable {
    typealias Instant = ManualClock.Instant

    let manual = ManualClock()
    let limit: Duration
    private let taken = Mutex<[Duration]>([])

    init(limit: Duration = .seconds(1)) { self.limit = limit }

    var now: Instant { manual.now }
    var minimumResolution: Duration { .zero }
    /// The short sleeps that passed at once, in order.
    var pauses: [Duration] { taken.withLock { $0 } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let wait = manual.now.duration(to: deadline)
        if wait > .zero, wait <= limit {
            try Task.checkCancellation()
            taken.withLock { $0.append(wait) }
            manual.advance(by: wait)
            return
        }
        try await manual.sleep(until: deadline, tolerance: tolerance)
    }

    func advance(by duration: Duration) { manual.advance(by: duration) }
    func waitForSleepers(_ count: Int = 1) async { await manual.waitForSleepers(count) }
    var sleeperCount: Int { manual.sleeperCount }
}
