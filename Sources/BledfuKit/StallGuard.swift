import DFUCore
import LinuxIO
import Synchronization

/// The updater's own watchdog (``UpdateRequest/stallLimit``, `bledfu flash --stall-timeout`): every event of the
/// update touches it; when none came for the limit, ``UpdateRun`` ends the update with ``DFUError/Code/stalled``
/// whatever the flow is waiting on. Every wait of the flow has its own deadline; this is the guarantee for a wait
/// that lost its wake-up (a reactor, a kernel, a controller that never answers), so that a hang ends in one line
/// and an exit code instead of a process that never returns.
final class StallGuard: Sendable {
    let limit: Duration
    /// The watchdog's clock: real time in a program (a hang is in real time; the updater's own clock may be a
    /// test's manual one).
    let clock: UpdateClock
    /// Events so far, when the last one came, and what it was.
    private let last: Mutex<(count: Int, at: UpdateClock.Instant, event: String)>
    private let stalled = Mutex(false)
    /// How long a stalled flow gets to end after it was cancelled (to close its link) before the run ends anyway.
    static let grace: Duration = .seconds(5)

    init(limit: Duration, clock: any Clock<Duration>) {
        self.limit = limit
        let clock = UpdateClock(clock)
        self.clock = clock
        last = Mutex((0, clock.now, "starting"))
    }

    /// Something happened.
    func touch(_ event: UpdateEvent) {
        let text = String(describing: event)
        let short = text.count > 120 ? String(text.prefix(117)) + "..." : text
        let now = clock.now
        last.withLock { $0 = ($0.count + 1, now, short) }
    }

    /// Returns, with the last thing that happened, once `limit` passed since it without another event; nil when
    /// cancelled (the update ended).
    func waitForStall() async -> String? {
        while true {
            let (count, at, event) = last.withLock { $0 }
            do {
                try await clock.sleep(until: at.advanced(by: limit), tolerance: nil)
            } catch {
                return nil
            }
            if last.withLock({ $0.count }) == count {
                stalled.withLock { $0 = true }
                return event
            }
        }
    }

    /// The watchdog fired (the flow was cancelled by it, not by the caller).
    var fired: Bool { stalled.withLock { $0 } }

    /// The last thing that happened.
    var lastEvent: String { last.withLock { $0.event } }

    /// The error that ends a stalled update.
    func error(lastEvent: String) -> DFUError {
        DFUError(
            .stalled,
            "nothing happened for \(UpdateFlow.seconds(limit)) s (last: \(lastEvent)); bledfu's watchdog ended the "
                + "update (--stall-timeout); the upload is resumable")
    }

    /// What the process's I/O reactor waits on, for the log of a stall (one line per wait and armed descriptor).
    static var reactorState: String { Reactor.shared.diagnostics() ?? "reactor: locked" }
}

/// The end of an update, settled once: by the flow, or by the watchdog when the flow does not end.
final class UpdateVerdict: Sendable {
    private struct State {
        var result: Result<UpdateResult, DFUError>?
        var waiters: [CheckedContinuation<Result<UpdateResult, DFUError>, Never>] = []
    }

    private let state = Mutex(State())

    /// The first settlement wins; later ones are ignored.
    func settle(_ result: Result<UpdateResult, DFUError>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Result<UpdateResult, DFUError>, Never>] in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }

    var value: Result<UpdateResult, DFUError> {
        get async {
            await withCheckedContinuation { continuation in
                let settled = state.withLock { state -> Result<UpdateResult, DFUError>? in
                    if let result = state.result { return result }
                    state.waiters.append(continuation)
                    return nil
                }
                if let settled { continuation.resume(returning: settled) }
            }
        }
    }
}
