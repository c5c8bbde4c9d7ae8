import Synchronization

/// The HCI scans of this process that have not finished yet (their final disable command included).
///
/// The kernel follows the scan state that raw HCI commands change (it reads their Command Complete events). A
/// connect makes the kernel reconfigure scanning for its own connection scan; started while one of our scans is
/// still being disabled, the kernel and the controller disagree and the kernel gives up on that connection ("Unable
/// to disable scanning"). So `BlueZAdapter.connect` waits until no scan is active. Each scan's end is bounded by its
/// HCI command timeout, so the wait is too.
public final class ScanActivity: Sendable {
    public static let shared = ScanActivity()

    public init() {}

    private struct State {
        var active = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A scan starts (call before its task runs, so that a connect right after sees it).
    public func begin() {
        state.withLock { $0.active += 1 }
    }

    /// A scan ended: wakes the waiters once none is left.
    public func end() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.active = max(0, state.active - 1)
            guard state.active == 0 else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no scan is active, or after `timeout` (a scan that keeps running is not worth waiting for: its
    /// end is only awaited when it is being stopped, which takes at most an HCI command timeout).
    public func waitIdle(timeout: Duration = .seconds(3)) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitUntilIdle() }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Waits until no scan is active; cancellation ends the wait.
    private func waitUntilIdle() async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.active == 0 || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    public var activeScans: Int { state.withLock { $0.active } }
    /// Connects waiting for the scans to end.
    public var waitingConnects: Int { state.withLock { $0.waiters.count } }
}
