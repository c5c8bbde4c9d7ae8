#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import Synchronization

/// The last guard of a command-line run against waiting forever: a thread of its own, outside Swift's cooperative
/// pool, that ends the process when nobody fed it for `limit`.
///
/// An update has its own watchdog (BledfuKit's `StallGuard`), but that watchdog is a task: it needs a thread of the
/// cooperative pool to notice the stall and to end the run, and so does the command that prints the result. When
/// every pool thread is blocked (a call that never returns, a lock never released: the pool has one thread per core,
/// two on the machines the VM test runs), no task runs again, the watchdog included (docs/vm-test.md, the hang after
/// the jump). This thread still does: it writes the caller's last words straight to the descriptors (no Foundation
/// handle, no lock another thread may hold) and `_exit`s with the caller's status.
///
/// Feed it on every sign of life; ``stop()`` when the run ended. The thread sleeps at most one second at a time, so a
/// stop lets it end within that.
public final class ProcessBackstop: Sendable {
    private struct State {
        var deadline: ContinuousClock.Instant
        var stopped = false
        var fired = false
    }

    public let limit: Duration
    private let state: Mutex<State>
    private let action: @Sendable () -> Void
    private let now: @Sendable () -> ContinuousClock.Instant

    /// A backstop that calls `action` (on its own thread) once `limit` passed without ``feed()``, by `now` (a
    /// test's own time; the thread still looks at it at least once a second). For tests; a program uses
    /// ``init(limit:exitStatus:lastWords:)``.
    public init(
        limit: Duration, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        action: @escaping @Sendable () -> Void
    ) {
        self.limit = limit
        self.action = action
        self.now = now
        state = Mutex(State(deadline: now().advanced(by: limit)))
        let thread = Thread { [self] in self.watch() }
        thread.name = "bledfu-backstop"
        thread.start()
    }

    /// A backstop that, once `limit` passed without ``feed()``, writes what `lastWords` returns (standard output's
    /// text first, then standard error's) and ends the process with `exitStatus`.
    public convenience init(
        limit: Duration, exitStatus: CInt, lastWords: @escaping @Sendable () -> (standardOutput: String, standardError: String)
    ) {
        self.init(limit: limit) {
            let (output, error) = lastWords()
            Self.writeAll(output, to: 1)
            Self.writeAll(error, to: 2)
            _exit(exitStatus)
        }
    }

    /// A sign of life: the limit counts again from now.
    public func feed() {
        let now = self.now()
        state.withLock { $0.deadline = now.advanced(by: limit) }
    }

    /// The run ended: the backstop never fires.
    public func stop() {
        state.withLock { $0.stopped = true }
    }

    /// Whether the limit passed and the action ran (or runs).
    public var fired: Bool { state.withLock { $0.fired } }

    private func watch() {
        system_setThreadName("bledfu-backstop")
        while true {
            let now = self.now()
            let (stopped, remaining) = state.withLock { state -> (Bool, Duration) in
                if state.stopped { return (true, .zero) }
                let remaining = now.duration(to: state.deadline)
                if remaining <= .zero { state.fired = true }
                return (false, remaining)
            }
            if stopped { return }
            if remaining <= .zero {
                action()
                return
            }
            let (seconds, attoseconds) = min(remaining, .seconds(1)).components
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
    }

    private static func writeAll(_ text: String, to fd: CInt) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { system_write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}
