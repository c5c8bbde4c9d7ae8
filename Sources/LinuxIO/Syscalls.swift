// Every call bledfu makes to the C library goes through the `system_*` wrappers of LinuxIO's Syscalls*.swift
// files (this one: the policy helpers and the mocking hook; by concern: +Sockets, +Messages, +Epoll, +Files,
// +Bluetooth). Each wrapper is a thin `@inline(never)` call with a mocking hook (the swift-system "Mocking"
// pattern): when a `SyscallMock` is installed for the current task, the call is recorded and answered from the
// mock's script instead of reaching the kernel.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// MARK: - Policy helpers

/// The errno of the last failed call on this thread.
@inline(__always)
func currentErrno() -> Errno { Errno(rawValue: errno) }

/// Runs a libc-style call returning -1 on failure. EINTR is retried when `retryOnInterrupt` is true.
public func valueOrErrno<I: FixedWidthInteger>(
    retryOnInterrupt: Bool = true, _ call: () -> I
) -> Result<I, Errno> {
    while true {
        let value = call()
        if value != -1 { return .success(value) }
        let error = currentErrno()
        if retryOnInterrupt && error == .interrupted { continue }
        return .failure(error)
    }
}

/// The outcome of a non-blocking operation: EAGAIN/EWOULDBLOCK is a value, not an error.
public enum IOResult<T> {
    case processed(T)
    case wouldBlock
}

extension IOResult: Sendable where T: Sendable {}

/// Like `valueOrErrno`, with EAGAIN/EWOULDBLOCK mapped to `.wouldBlock`.
public func ioResultOrErrno<I: FixedWidthInteger>(_ call: () -> I) -> Result<IOResult<I>, Errno> {
    switch valueOrErrno(retryOnInterrupt: true, call) {
    case .success(let value): return .success(.processed(value))
    case .failure(let error) where error == .wouldBlock || error == .resourceTemporarilyUnavailable:
        return .success(.wouldBlock)
    case .failure(let error): return .failure(error)
    }
}

// MARK: - Mocking hook

#if ENABLE_MOCKING
/// Answers a call from the installed mock, or nil when no mock is installed (or it passes this call through).
@inline(__always)
func mocked(
    _ name: String, _ arguments: [Int], input: UnsafeRawBufferPointer? = nil,
    output: UnsafeMutableRawBufferPointer? = nil
) -> Int? {
    guard !SyscallMock.isBypassed, let mock = SyscallMock.current else { return nil }
    return mock.handle(name, arguments: arguments, input: input, output: output)
}
#endif

/// Wall-clock time (CLOCK_REALTIME) in microseconds since 1970-01-01 UTC.
@inline(never)
public func system_realtimeMicroseconds() -> Int64 {
    var now = timespec()
    _ = clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1_000
}

/// Sets errno on this thread (used by the mock to report a scripted failure).
func system_setErrno(_ value: Errno) { errno = value.rawValue }

