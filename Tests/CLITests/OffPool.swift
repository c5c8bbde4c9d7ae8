import Foundation
import LinuxIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The one place where test code may block a thread: tools/check-test-waits fails on `usleep`, `waitUntilExit()`,
/// `Thread.sleep`, `DispatchSemaphore` and the like anywhere else under Tests/.
///
/// The cooperative pool has as many threads as the machine has cores (two here). A test that blocks one of them
/// (a poll loop with `usleep`, waiting for a child, a blocking read) stops every other test of the process once the
/// pool is full, while their clocks run on: in-process ATT and SMP timeouts expired with the answer waiting
/// (docs/reliability.md, "Starved pool"). So an async test path never blocks: it polls with ``poll(timeout:every:_:)``
/// (`Task.sleep`), awaits a child's exit on the reactor (``ChildProcess/waitForExit(timeout:)``), and runs what must
/// block (a tool run to completion, a blocking read) through ``run(_:)``, on a thread of its own.
enum OffPool {
    /// Runs `body` on a thread of its own; the awaiting task gives its cooperative thread back meanwhile.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                do {
                    continuation.resume(returning: try body())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }

    /// Checks `condition` every `interval` for at most `timeout`, sleeping with `Task.sleep` in between (no thread
    /// held); true once it holds. Ends early, false, when the task is cancelled (the test's time limit).
    @discardableResult
    static func poll(
        timeout: Duration, every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
    ) async rethrows -> Bool {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            do {
                try await Task.sleep(for: interval)
            } catch {
                break
            }
        }
        return try await condition()
    }

    /// Blocks the calling thread up to `seconds` until `condition` holds (checked every `interval` seconds). Only on
    /// a thread of its own (inside ``run(_:)``), or in a `deinit` or `defer` (they cannot await) for a short bound: a
    /// signalled child's exit.
    @discardableResult
    static func blockingPoll(seconds: Double, every interval: Double = 0.01, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(useconds_t(interval * 1_000_000))
        }
        return try condition()
    }

    /// Blocks the calling thread for `microseconds`. Only on a thread of its own (inside ``run(_:)``): a pause
    /// between a watched point and the action taken there.
    static func blockingPause(microseconds: useconds_t) {
        usleep(microseconds)
    }
}

extension ChildProcess {
    /// Awaits the exit on the reactor (no thread held) for at most `timeout`, then SIGKILL and up to 10 s more.
    /// The exit, or nil when the child outlived both.
    @discardableResult
    func waitForExit(timeout: Duration) async -> ChildExit? {
        await end(grace: timeout)
    }

    /// For `defer`: gives the child `grace` seconds to end on its own, waiting on a thread of its own, then SIGKILL;
    /// the caller goes on at once.
    func endDetached(grace: Double) {
        Thread { [self] in
            if !OffPool.blockingPoll(seconds: grace, { self.exit != nil }) { signal(SIGKILL) }
        }.start()
    }

    /// `signal` (SIGTERM), then a blocking wait of at most 5 s for the exit, then SIGKILL and at most 5 s more. For
    /// `deinit` and `defer` only (they cannot await): bounded to a signalled child's exit, well below the ATT
    /// timeouts of the in-process tests beside it. A child still there after that is reaped by `ChildProcess` when
    /// it goes.
    func terminateBlocking(signal first: CInt = SIGTERM) {
        guard self.exit == nil else { return }
        signal(first)
        if OffPool.blockingPoll(seconds: 5, { self.exit != nil }) { return }
        signal(SIGKILL)
        OffPool.blockingPoll(seconds: 5) { self.exit != nil }
    }
}

/// Reads a (non-blocking) descriptor to its end on a thread of its own, waiting with poll(2) between reads; closes
/// it there (never while the thread may still read it).
final class BlockingCollector: Sendable {
    private let bytes = Mutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)

    init(_ fd: CInt) {
        let thread = Thread { [self] in
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while true {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    self.bytes.withLock { $0 += buffer[..<count] }
                } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                    break
                } else {
                    _ = poll(&entry, 1, 1000)
                }
            }
            close(fd)
            self.done.signal()
        }
        thread.start()
    }

    /// The bytes, once the descriptor reached its end (or what came until `deadline`: a grandchild may keep the
    /// pipe open).
    func wait(until deadline: Date) -> [UInt8] {
        _ = done.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow))
        return bytes.withLock { $0 }
    }
}
