import Synchronization

/// Fires once when nothing was heard for `limit`: every sign of life (``touch()``) moves the deadline. One task
/// sleeps until the deadline it knows and, on waking, fires if the deadline has passed or sleeps on to the moved one,
/// so a chatty source (progress lines many times a second) costs a clock read per line, not a timer.
public final class StallWatchdog<C: Clock<Duration>>: Sendable {
    private struct State {
        var deadline: C.Instant
        var finished = false
        var fired = false
    }

    /// The state the sleeping task shares with the watchdog.
    private final class Shared: Sendable {
        let state: Mutex<State>
        init(_ state: State) { self.state = Mutex(state) }
    }

    private let clock: C
    private let limit: Duration
    private let shared: Shared
    private let sleeper = Mutex<Task<Void, Never>?>(nil)

    /// Starts watching now; `onStall` runs (once, on the watchdog's task) when `limit` passes without a ``touch()``.
    public init(limit: Duration, clock: C, onStall: @escaping @Sendable () -> Void) {
        self.clock = clock
        self.limit = limit
        let first = clock.now.advanced(by: limit)
        let shared = Shared(State(deadline: first))
        self.shared = shared
        let task = Task {
            var until = first
            while true {
                do {
                    try await clock.sleep(until: until, tolerance: nil)
                } catch {
                    return  // stopped
                }
                let now = clock.now
                let fire = shared.state.withLock { state -> Bool? in
                    if state.finished { return nil }
                    if state.deadline <= now {
                        state.finished = true
                        state.fired = true
                        return true
                    }
                    until = state.deadline
                    return false
                }
                guard let fire else { return }
                if fire {
                    onStall()
                    return
                }
            }
        }
        sleeper.withLock { $0 = task }
    }

    /// A sign of life: the deadline moves to `limit` from now.
    public func touch() {
        let next = clock.now.advanced(by: limit)
        shared.state.withLock { $0.deadline = next }
    }

    /// Stops watching (idempotent); returns true when the watchdog had fired.
    @discardableResult
    public func stop() -> Bool {
        let fired = shared.state.withLock { state -> Bool in
            state.finished = true
            return state.fired
        }
        sleeper.withLock { $0 }?.cancel()
        return fired
    }
}
