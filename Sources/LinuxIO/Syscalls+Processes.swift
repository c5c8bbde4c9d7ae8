import CLinuxShim
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// Child processes (ChildProcess.swift), in the style of Syscalls.swift: one thin wrapper per call, answered by
// SyscallMock in tests. posix_spawn is used instead of Foundation's `Process`, which watches its children through a
// CFSocket whose wake-up pair needs the loopback interface (docs/reliability.md, "The batch that waited forever").

/// posix_spawn(3). Returns 0 or the error number (posix_spawn does not set errno); the mock's `returns(pid)` sets
/// `pid` and answers 0, its `fails(errno)` answers that number.
@inline(never)
public func system_posix_spawn(
    _ pid: UnsafeMutablePointer<pid_t>, _ path: UnsafePointer<CChar>,
    _ actions: UnsafePointer<posix_spawn_file_actions_t>?, _ attributes: UnsafePointer<posix_spawnattr_t>?,
    _ argv: UnsafePointer<UnsafeMutablePointer<CChar>?>, _ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>?
) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("posix_spawn", []) {
        if value < 0 { return errno }
        pid.pointee = pid_t(value)
        return 0
    }
    #endif
    return posix_spawn(pid, path, actions, attributes, argv, envp)
}

/// pidfd_open(2): a descriptor that is readable once the child has exited (ENOSYS before Linux 5.3).
@inline(never)
public func system_pidfd_open(_ pid: pid_t, _ flags: CUnsignedInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("pidfd_open", [Int(pid), Int(flags)]) { return CInt(value) }
    #endif
    return bledfu_pidfd_open(pid, flags)
}

/// waitpid(2). The mock answers the pid (or 0 for WNOHANG with nothing to reap); the status it reports is the
/// mock's `bytes` step's first four bytes when given that way, else 0 (exited with 0).
@inline(never)
public func system_waitpid(_ pid: pid_t, _ status: UnsafeMutablePointer<CInt>, _ options: CInt) -> pid_t {
    #if ENABLE_MOCKING
    if let value = mocked(
        "waitpid", [Int(pid), Int(options)], output: UnsafeMutableRawBufferPointer(start: status, count: MemoryLayout<CInt>.size))
    {
        return pid_t(value == MemoryLayout<CInt>.size ? Int(pid) : value)
    }
    #endif
    return waitpid(pid, status, options)
}

/// pipe2(2) with flags (O_CLOEXEC): the ends never leak into a child another thread spawns meanwhile.
@inline(never)
public func system_pipe2(_ fds: UnsafeMutablePointer<CInt>, _ flags: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("pipe2", [Int(flags)]) { return CInt(value) }
    #endif
    return bledfu_pipe2(fds, flags)
}

/// Names the calling thread (its /proc/thread-self/comm, as pthread_setname_np(3) does): what `ps -T`, a thread
/// dump and `eu-stack` show (Foundation's `Thread.name` does not reach it on Linux). At most 15 bytes (ASCII) are kept.
/// Returns false when the kernel refused (no /proc).
@discardableResult
public func system_setThreadName(_ name: String) -> Bool {
    guard case .success(let fd) = valueOrErrno({ system_open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC, 0) }) else {
        return false
    }
    defer { _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) } }
    return (try? FileIO.writeAll(fd, Array(name.utf8.prefix(15)))) != nil
}
