#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import Synchronization
import SystemPackage

/// Readiness notification without busy polling and without blocking Swift's cooperative threads.
///
/// One dedicated thread sits in `poll(2)` on the registered descriptors plus the read end of a wake-up pipe.
/// `wait(for:readable:timeout:)` registers a continuation and writes one byte to the pipe so the thread rebuilds
/// its set; when a descriptor becomes ready (or reports an error or hang-up, which the next I/O call will
/// surface), its continuations are resumed. Deadlines are handled by the poll timeout.
public final class Reactor: Sendable {
    /// The process-wide reactor (its thread starts on first use).
    public static let shared = Reactor()

    private struct Registration {
        var fd: CInt
        var readable: Bool
        var deadline: ContinuousClock.Instant?
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var registrations: [UInt64: Registration] = [:]
        var nextID: UInt64 = 0
        var started = false
        /// Waits cancelled before they registered.
        var cancelledEarly: Set<UInt64> = []
    }

    private let state = Mutex(State())
    private let wakeRead: CInt
    private let wakeWrite: CInt

    private init() {
        var fds: [CInt] = [-1, -1]
        let result = Reactor.withoutMock { valueOrErrno { system_pipe(&fds) } }
        // Without a pipe the reactor cannot be woken; fall back to a short poll timeout (see `loop`).
        let configured = Reactor.withoutMock { () -> Bool in
            guard case .success = result else { return false }
            do throws(Errno) {
                try SocketDescriptor.setNonBlockingCloseOnExec(fds[0])
                try SocketDescriptor.setNonBlockingCloseOnExec(fds[1])
                return true
            } catch {
                return false
            }
        }
        if configured {
            wakeRead = fds[0]
            wakeWrite = fds[1]
        } else {
            wakeRead = -1
            wakeWrite = -1
        }
    }

    static func withoutMock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        #if ENABLE_MOCKING
        let result: Result<R, E> = SyscallMock.bypass {
            do throws(E) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
        #else
        return try body()
        #endif
    }

    /// Suspends until `fd` is readable (or writable), the deadline passes (ETIMEDOUT) or the task is cancelled
    /// (ECANCELED). Error and hang-up conditions count as ready.
    public func wait(for fd: CInt, readable: Bool, timeout: Duration? = nil) async throws(Errno) {
        let deadline = timeout.map { ContinuousClock.now.advanced(by: $0) }
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        let result: Result<Void, Errno> = await withTaskCancellationHandler {
            do {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    self.register(id: id, fd: fd, readable: readable, deadline: deadline, continuation: continuation)
                }
                return .success(())
            } catch let error as Errno {
                return .failure(error)
            } catch {
                return .failure(.canceled)
            }
        } onCancel: {
            self.resume(id: id, with: .failure(.canceled))
        }
        try result.get()
    }

    /// How many waits are registered on `fd` (lets tests see that a sender or receiver has suspended).
    public func pendingWaitCount(on fd: CInt) -> Int {
        state.withLock { $0.registrations.values.filter { $0.fd == fd }.count }
    }

    /// Resumes every wait on `fd` with ECANCELED (call before closing a descriptor).
    public func cancelWaits(on fd: CInt) {
        let cancelled = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            let ids = state.registrations.filter { $0.value.fd == fd }.map(\.key)
            return ids.compactMap { state.registrations.removeValue(forKey: $0)?.continuation }
        }
        for continuation in cancelled { continuation.resume(throwing: Errno.canceled) }
        wake()
    }

    private func register(
        id: UInt64, fd: CInt, readable: Bool, deadline: ContinuousClock.Instant?,
        continuation: CheckedContinuation<Void, any Error>
    ) {
        let (startThread, cancelled) = state.withLock { state -> (Bool, Bool) in
            if state.cancelledEarly.remove(id) != nil { return (false, true) }
            state.registrations[id] = Registration(
                fd: fd, readable: readable, deadline: deadline, continuation: continuation)
            defer { state.started = true }
            return (!state.started, false)
        }
        if cancelled {
            continuation.resume(throwing: Errno.canceled)
            return
        }
        if startThread {
            let thread = Thread { [self] in self.loop() }
            thread.name = "bledfu-reactor"
            thread.start()
        }
        wake()
    }

    /// Resumes one registration if it is still pending (cancellation).
    private func resume(id: UInt64, with result: Result<Void, Errno>) {
        let registration = state.withLock { state -> Registration? in
            guard let registration = state.registrations.removeValue(forKey: id) else {
                state.cancelledEarly.insert(id)
                return nil
            }
            return registration
        }
        registration?.continuation.resume(with: result.mapError { $0 as any Error })
        wake()
    }

    private func wake() {
        guard wakeWrite >= 0 else { return }
        var byte: UInt8 = 1
        // A full pipe already guarantees a wake-up, so EAGAIN is fine to ignore.
        _ = Reactor.withoutMock { valueOrErrno { system_write(wakeWrite, &byte, 1) } }
    }

    private func loop() {
        let shortPoll: Duration = .milliseconds(50)
        while true {
            let now = ContinuousClock.now
            let (fds, ids, timeout) = state.withLock { state -> ([pollfd], [UInt64], CInt) in
                var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
                var ids: [UInt64] = [0]
                var earliest: ContinuousClock.Instant?
                for (id, registration) in state.registrations {
                    if registration.fd >= 0 {
                        let events = registration.readable ? POLLIN : POLLOUT
                        fds.append(pollfd(fd: registration.fd, events: Int16(events), revents: 0))
                        ids.append(id)
                    }
                    if let deadline = registration.deadline, earliest.map({ deadline < $0 }) ?? true {
                        earliest = deadline
                    }
                }
                var wait: Duration? = earliest.map { max(.zero, now.duration(to: $0)) }
                if wakeRead < 0 { wait = min(wait ?? shortPoll, shortPoll) }
                return (fds, ids, wait.map(Reactor.milliseconds) ?? -1)
            }
            var polled = fds
            _ = valueOrErrno { system_poll(&polled, nfds_t(polled.count), timeout) }
            if polled[0].revents != 0 { drainWakePipe() }
            let after = ContinuousClock.now
            var ready: [(CheckedContinuation<Void, any Error>, Result<Void, any Error>)] = []
            state.withLock { state in
                for index in 1..<polled.count where polled[index].revents != 0 {
                    if let registration = state.registrations.removeValue(forKey: ids[index]) {
                        ready.append((registration.continuation, .success(())))
                    }
                }
                for (id, registration) in state.registrations {
                    if let deadline = registration.deadline, deadline <= after {
                        state.registrations.removeValue(forKey: id)
                        ready.append((registration.continuation, .failure(Errno.timedOut)))
                    }
                }
            }
            for (continuation, result) in ready { continuation.resume(with: result) }
        }
    }

    private func drainWakePipe() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while case .success(let count) = valueOrErrno(retryOnInterrupt: true, { system_read(wakeRead, &buffer, 256) }),
            count > 0
        {}
    }

    /// Rounds up so a deadline is never reported early.
    private static func milliseconds(_ duration: Duration) -> CInt {
        let (seconds, attoseconds) = duration.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return CInt(clamping: ms)
    }
}
