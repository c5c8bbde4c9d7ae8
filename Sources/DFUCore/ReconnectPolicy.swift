/// How a lost link is retried (issue point 5): every disconnect *episode* gets up to ``attempts`` connection
/// attempts, the n-th after ``delay(beforeAttempt:)`` (exponential backoff, capped); a successful connection ends the
/// episode. Episodes that end without a new executed object count, so a device that drops every link at once cannot
/// keep the host busy forever: after ``attempts`` such episodes in a row the transfer stops (resumable).
///
/// `attempts == 0` means "never reconnect": the first loss ends the run with the journal kept.
public struct ReconnectPolicy: Hashable, Sendable {
    /// Connection attempts per episode, and episodes without progress in a row before giving up.
    public var attempts: Int
    /// Wait before the first attempt of an episode; doubled for every further attempt.
    public var initialDelay: Duration
    /// Upper bound of the backoff.
    public var maximumDelay: Duration

    public init(attempts: Int = 5, initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(8)) {
        self.attempts = max(0, attempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// The wait before attempt `attempt` (0-based) of an episode: 0.5, 1, 2, 4, 8, 8 … s by default.
    public func delay(beforeAttempt attempt: Int) -> Duration {
        var delay = initialDelay
        for _ in 0..<max(0, min(attempt, 32)) {
            delay = delay * 2
            if delay >= maximumDelay { return maximumDelay }
        }
        return min(delay, maximumDelay)
    }

    /// The waits of one whole episode, in order.
    public var episodeDelays: [Duration] { (0..<attempts).map { delay(beforeAttempt: $0) } }
}

/// The running count of a ``ReconnectPolicy`` over one transfer.
public struct ReconnectBudget: Hashable, Sendable {
    public let policy: ReconnectPolicy
    /// Disconnect episodes in a row that ended without a new executed object.
    public private(set) var episodesWithoutProgress = 0
    /// All episodes so far.
    public private(set) var episodes = 0

    public init(policy: ReconnectPolicy) { self.policy = policy }

    /// A link loss. `progressed`: the device executed an object since the previous loss (or since the start).
    /// Returns whether to start a reconnect episode (false: stop, the journal lets a later run continue).
    public mutating func linkLost(progressed: Bool) -> Bool {
        episodesWithoutProgress = progressed ? 1 : episodesWithoutProgress + 1
        guard policy.attempts > 0, episodesWithoutProgress <= policy.attempts else { return false }
        episodes += 1
        return true
    }
}
