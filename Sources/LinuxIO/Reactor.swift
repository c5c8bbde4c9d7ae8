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
/// One dedicated thread sits in `epoll_wait(2)`. `wait(for:readable:timeout:)` registers a continuation and arms the
/// descriptor in the epoll set (`EPOLLONESHOT`, the interest of every wait on it) from the caller's thread, so the
/// reactor thread needs no wake-up to see it; when a descriptor becomes ready (or reports an error or hang-up,
/// which the next I/O call will surface), the continuations waiting for that direction are resumed and the
/// descriptor is re-armed for the others. Deadlines are handled by the epoll timeout; a wait with a deadline
/// writes one byte to a wake-up pipe so the thread recomputes it. A descriptor epoll refuses (a regular file)
/// counts as ready at once, as poll(2) reports it.
///
/// A wait names a descriptor by its number, so the number must stay the waiter's until the wait has ended: a number
/// closed and handed to another socket meanwhile would make the wait watch a stranger. ``SharedDescriptor`` keeps
/// the number open while any task uses it and calls ``retire(_:)`` when its owner closes it.
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
        /// Descriptors in the epoll set and the events they are armed for (0: disarmed, a one-shot that fired).
        var armed: [CInt: UInt32] = [:]
        /// Descriptors being closed (``retire(_:)``): a wait on one ends at once with ECANCELED.
        var retired: Set<CInt> = []
    }

    private let state = Mutex(State())
    private let epoll: CInt
    private let wakeRead: CInt
    private let wakeWrite: CInt
    /// The epoll data of the wake-up pipe (descriptors are never this large).
    private static let wakeData = UInt64.max

    private init() {
        let epollFD = Reactor.withoutMock { () -> CInt in
            switch valueOrErrno({ system_epoll_create1(EpollEvents.closeOnExec) }) {
            case .success(let fd): return fd
            case .failure: return -1
            }
        }
        epoll = epollFD
        var fds: [CInt] = [-1, -1]
        let result = Reactor.withoutMock { valueOrErrno { system_pipe(&fds) } }
        // Without a pipe a new deadline is noticed late; the loop then wakes every 50 ms (see `loop`).
        let configured = Reactor.withoutMock { () -> Bool in
            guard case .success = result else { return false }
            do throws(Errno) {
                try SocketDescriptor.setNonBlockingCloseOnExec(fds[0])
                try SocketDescriptor.setNonBlockingCloseOnExec(fds[1])
            } catch {
                return false
            }
            return EpollEvents.withEvent(events: EpollEvents.readable, data: Reactor.wakeData) { event in
                system_epoll_ctl(epollFD, EpollEvents.control.add, fds[0], event) == 0
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

    /// What the reactor holds, one line per registered wait and per armed descriptor (for a hang detector: see
    /// `bledfu_reactor_dump`). Nil when another thread holds the reactor's lock.
    public func diagnostics() -> String? {
        let now = ContinuousClock.now
        return state.withLockIfAvailable { state -> String in
            let waits = state.registrations.sorted { $0.key < $1.key }.map { id, registration in
                "wait \(id): fd \(registration.fd) \(registration.readable ? "readable" : "writable")"
                    + (registration.deadline.map { " deadline in \(now.duration(to: $0))" } ?? " no deadline")
            }
            let armed = state.armed.sorted { $0.key < $1.key }.map { String(format: "armed: fd %d events 0x%x", $0.key, $0.value) }
            return (["reactor: \(waits.count) waits, \(armed.count) descriptors in the epoll set"] + waits + armed)
                .joined(separator: "\n")
        }
    }

    /// How many waits are registered on `fd` (lets tests see that a sender or receiver has suspended).
    public func pendingWaitCount(on fd: CInt) -> Int {
        state.withLock { $0.registrations.values.filter { $0.fd == fd }.count }
    }

    /// Resumes every wait on `fd` with ECANCELED and takes `fd` out of the epoll set (call just before closing it:
    /// the number is free for a new descriptor from then on).
    public func cancelWaits(on fd: CInt) {
        endWaits(on: fd, retiring: false)
    }

    /// Resumes every wait on `fd` with ECANCELED, takes `fd` out of the epoll set, and ends every later wait on it at
    /// once, until ``cancelWaits(on:)`` (`SocketDescriptor.close()`, just before close(2)) frees the number. For a
    /// descriptor whose owner closes it while other tasks may still be about to wait on it (``SharedDescriptor``).
    public func retire(_ fd: CInt) {
        endWaits(on: fd, retiring: true)
    }

    private func endWaits(on fd: CInt, retiring: Bool) {
        let epoll = self.epoll
        let cancelled = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            if retiring {
                state.retired.insert(fd)
            } else {
                state.retired.remove(fd)
            }
            if state.armed.removeValue(forKey: fd) != nil {
                // ENOENT/EBADF when it is already gone: nothing left to remove.
                _ = Reactor.withoutMock {
                    valueOrErrno { system_epoll_ctl(epoll, EpollEvents.control.delete, fd, nil) }
                }
            }
            let ids = state.registrations.filter { $0.value.fd == fd }.map(\.key)
            return ids.compactMap { state.registrations.removeValue(forKey: $0)?.continuation }
        }
        for continuation in cancelled { continuation.resume(throwing: Errno.canceled) }
    }

    private func register(
        id: UInt64, fd: CInt, readable: Bool, deadline: ContinuousClock.Instant?,
        continuation: CheckedContinuation<Void, any Error>
    ) {
        let (startThread, cancelled, ready) = state.withLock {
            state -> (Bool, Bool, [CheckedContinuation<Void, any Error>]) in
            if state.cancelledEarly.remove(id) != nil || state.retired.contains(fd) { return (false, true, []) }
            state.registrations[id] = Registration(
                fd: fd, readable: readable, deadline: deadline, continuation: continuation)
            let ready = arm(fd, &state)
            defer { state.started = true }
            return (!state.started, false, ready)
        }
        if cancelled {
            continuation.resume(throwing: Errno.canceled)
            return
        }
        for waiter in ready { waiter.resume() }
        if startThread {
            let thread = Thread { [self] in self.loop() }
            thread.name = "bledfu-reactor"
            thread.start()
        }
        // The loop sleeps until the earliest deadline it knew of; a new deadline may be earlier.
        if deadline != nil { wake() }
    }

    /// Arms `fd` in the epoll set for what its waits want (under the lock). Returns the waits to resume at once
    /// when epoll refuses the descriptor (a regular file is always ready; a bad descriptor fails at the next call).
    private func arm(_ fd: CInt, _ state: inout State) -> [CheckedContinuation<Void, any Error>] {
        guard fd >= 0 else { return [] }
        var wanted: UInt32 = 0
        for registration in state.registrations.values where registration.fd == fd {
            wanted |= registration.readable ? EpollEvents.readable : EpollEvents.writable
        }
        guard wanted != 0 else { return [] }
        let interest = wanted | EpollEvents.oneShot
        // Armed again even when `armed` says it is armed with this interest already: the number may have been
        // closed since by someone who did not tell the reactor (a Foundation pipe, a C library), and epoll forgot
        // it with its file, so skipping the call would leave the wait of the number's next owner unarmed forever.
        let current = state.armed[fd]
        let epoll = self.epoll
        let result = Reactor.withoutMock { () -> Result<CInt, Errno> in
            EpollEvents.withEvent(events: interest, data: UInt64(fd)) { event in
                let first = current == nil ? EpollEvents.control.add : EpollEvents.control.modify
                switch valueOrErrno({ system_epoll_ctl(epoll, first, fd, event) }) {
                case .failure(let error) where error == .noSuchFileOrDirectory:
                    // Closed and reopened under the same number without cancelWaits: epoll dropped it.
                    return valueOrErrno { system_epoll_ctl(epoll, EpollEvents.control.add, fd, event) }
                case .failure(let error) where error == .fileExists:
                    return valueOrErrno { system_epoll_ctl(epoll, EpollEvents.control.modify, fd, event) }
                case let other: return other
                }
            }
        }
        if case .success = result {
            state.armed[fd] = interest
            return []
        }
        state.armed[fd] = nil
        let ids = state.registrations.filter { $0.value.fd == fd }.map(\.key)
        return ids.compactMap { state.registrations.removeValue(forKey: $0)?.continuation }
    }

    /// Resumes one registration if it is still pending (cancellation). The descriptor stays armed; an event nobody
    /// waits for any more just disarms it.
    private func resume(id: UInt64, with result: Result<Void, Errno>) {
        let registration = state.withLock { state -> Registration? in
            guard let registration = state.registrations.removeValue(forKey: id) else {
                state.cancelledEarly.insert(id)
                return nil
            }
            return registration
        }
        registration?.continuation.resume(with: result.mapError { $0 as any Error })
    }

    private func wake() {
        guard wakeWrite >= 0 else { return }
        var byte: UInt8 = 1
        // A full pipe already guarantees a wake-up, so EAGAIN is fine to ignore.
        _ = Reactor.withoutMock { valueOrErrno { system_write(wakeWrite, &byte, 1) } }
    }

    private func loop() {
        system_setThreadName("bledfu-reactor")
        let shortPoll: Duration = .milliseconds(50)
        let events = EpollEvents(capacity: 64)
        while true {
            let now = ContinuousClock.now
            let timeout = state.withLock { state -> CInt in
                var earliest: ContinuousClock.Instant?
                for registration in state.registrations.values {
                    if let deadline = registration.deadline, earliest.map({ deadline < $0 }) ?? true {
                        earliest = deadline
                    }
                }
                var wait: Duration? = earliest.map { max(.zero, now.duration(to: $0)) }
                if wakeRead < 0 { wait = min(wait ?? shortPoll, shortPoll) }
                return wait.map(Reactor.milliseconds) ?? -1
            }
            let count: Int
            switch valueOrErrno({ system_epoll_wait(epoll, events.buffer, CInt(events.capacity), timeout) }) {
            case .success(let value): count = Int(value)
            case .failure:
                // No epoll set (epoll_create1 failed): nothing can become ready; only deadlines pass.
                count = 0
                if epoll < 0 { Thread.sleep(forTimeInterval: 0.05) }
            }
            var drain = false
            let after = ContinuousClock.now
            var ready: [(CheckedContinuation<Void, any Error>, Result<Void, any Error>)] = []
            var resumeAtOnce: [CheckedContinuation<Void, any Error>] = []
            state.withLock { state in
                for index in 0..<count {
                    let data = events.data(index)
                    if data == Reactor.wakeData {
                        drain = true
                        continue
                    }
                    let fd = CInt(truncatingIfNeeded: data)
                    let fired = events.events(index)
                    let problem = fired & (EpollEvents.error | EpollEvents.hangUp) != 0
                    // A one-shot that fired is disarmed until armed again.
                    if state.armed[fd] != nil { state.armed[fd] = 0 }
                    for (id, registration) in state.registrations where registration.fd == fd {
                        let wanted = registration.readable ? EpollEvents.readable : EpollEvents.writable
                        guard problem || fired & wanted != 0 else { continue }
                        state.registrations.removeValue(forKey: id)
                        ready.append((registration.continuation, .success(())))
                    }
                    resumeAtOnce += arm(fd, &state)
                }
                for (id, registration) in state.registrations {
                    if let deadline = registration.deadline, deadline <= after {
                        state.registrations.removeValue(forKey: id)
                        ready.append((registration.continuation, .failure(Errno.timedOut)))
                    }
                }
            }
            if drain { drainWakePipe() }
            for (continuation, result) in ready { continuation.resume(with: result) }
            for continuation in resumeAtOnce { continuation.resume() }
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


/// Writes ``Reactor/diagnostics()`` of the shared reactor to standard error. For a debugger attached to a hung
/// process: `gdb -p PID -batch -ex 'call (void)bledfu_reactor_dump()'` (tools/stress-suite does that).
@_cdecl("bledfu_reactor_dump")
public func bledfuReactorDump() {
    let text = (Reactor.shared.diagnostics() ?? "reactor: locked") + "\n"
    var bytes = Array(text.utf8)
    _ = Reactor.withoutMock { system_write(2, &bytes, bytes.count) }
}
