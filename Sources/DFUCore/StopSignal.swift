import Synchronization

/// A request to stop at the next safe point (Ctrl-C, ``UpdateRun/stop()``), seen by the updater and the family
/// that is uploading. Nothing polls it: waiters are resumed and handlers called when it is requested.
public final class StopSignal: Sendable {
    private struct State {
        var requested = false
        var nextID = 0
        var handlers: [Int: @Sendable () -> Void] = [:]
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    public var isRequested: Bool { state.withLock { $0.requested } }

    /// Requests the stop (idempotent): resumes every waiter and calls every handler once.
    public func request() {
        let (handlers, waiters) = state.withLock { state -> ([@Sendable () -> Void], [CheckedContinuation<Void, Never>]) in
            guard !state.requested else { return ([], []) }
            state.requested = true
            defer {
                state.handlers = [:]
                state.waiters = [:]
            }
            return (Array(state.handlers.values), Array(state.waiters.values))
        }
        for waiter in waiters { waiter.resume() }
        for handler in handlers { handler() }
    }

    /// Calls `handler` once when the stop is requested (at once when it already was). Returns a token whose
    /// ``Registration/cancel()`` removes the handler.
    @discardableResult
    public func onRequest(_ handler: @escaping @Sendable () -> Void) -> Registration {
        let id = state.withLock { state -> Int? in
            guard !state.requested else { return nil }
            state.nextID += 1
            state.handlers[state.nextID] = handler
            return state.nextID
        }
        guard let id else {
            handler()
            return Registration(signal: self, id: nil)
        }
        return Registration(signal: self, id: id)
    }

    /// Returns once the stop is requested (at once when it already was), or when the calling task is cancelled.
    public func requested() async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.requested || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    fileprivate func remove(_ id: Int) {
        _ = state.withLock { $0.handlers.removeValue(forKey: id) }
    }

    /// A handler registered with ``onRequest(_:)``.
    public struct Registration: Sendable {
        fileprivate let signal: StopSignal
        fileprivate let id: Int?

        /// Removes the handler (no effect once it ran).
        public func cancel() {
            if let id { signal.remove(id) }
        }
    }
}
