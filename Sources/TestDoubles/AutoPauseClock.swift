import Synchronization

/// A manual clock on which short sleeps pass at once: a sleep of at most ``limit`` (the pacing's prepare delay after
/// Create Data, at most 1 s in ``AdaptiveStreamPacing``) moves time to its deadline and returns, and is recorded in
/// ``pauses``. Longer sleeps (request and checkpoint timeouts, 10 s by default) wait for ``advance(by:)`` as on
/// ``ManualClock``. So a test runs the default pacing through the injected clock without a real wait.
public final class AutoPauseClock: Clock, Sendable {
    public typealias Instant = ManualClock.Instant

    public let manual = ManualClock()
    public let limit: Duration
    private let taken = Mutex<[Duration]>([])

    public init(limit: Duration = .seconds(1)) { self.limit = limit }

    public var now: Instant { manual.now }
    public var minimumResolution: Duration { .zero }
    /// The short sleeps that passed at once, in order.
    public var pauses: [Duration] { taken.withLock { $0 } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let wait = manual.now.duration(to: deadline)
        if wait > .zero, wait <= limit {
            try Task.checkCancellation()
            taken.withLock { $0.append(wait) }
            manual.advance(by: wait)
            return
        }
        try await manual.sleep(until: deadline, tolerance: tolerance)
    }

    public func advance(by duration: Duration) { manual.advance(by: duration) }
    public func waitForSleepers(_ count: Int = 1) async { await manual.waitForSleepers(count) }
    public var sleeperCount: Int { manual.sleeperCount }
}
