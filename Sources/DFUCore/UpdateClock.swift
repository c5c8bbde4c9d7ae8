/// Any `Clock<Duration>` behind one concrete type, so that families and the updater take the injected clock
/// without being generic over it: the real `ContinuousClock` in a program, a manual clock in a test.
///
/// Instants are offsets from the moment the wrapper was made; sleeping until one sleeps on the wrapped clock until
/// the same moment, so a manual clock's `advance(by:)` wakes sleepers exactly as it would unwrapped.
public struct UpdateClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
        /// Time since the wrapper was made.
        public var offset: Duration
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "t+\(offset)" }
    }

    private let elapsed: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration, Duration?) async throws -> Void
    public let minimumResolution: Duration

    public init<C: Clock<Duration>>(_ clock: C) {
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        sleeper = { offset, tolerance in try await clock.sleep(until: origin.advanced(by: offset), tolerance: tolerance) }
        minimumResolution = clock.minimumResolution
    }

    /// The wall clock (`ContinuousClock`).
    public static var continuous: UpdateClock { UpdateClock(ContinuousClock()) }

    public var now: Instant { Instant(offset: elapsed()) }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try await sleeper(deadline.offset, tolerance)
    }
}
