#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// Coordination between processes (signals, advisory file locks), in the style of Syscalls.swift: one thin wrapper
// per call, answered by SyscallMock in tests.

@inline(never)
public func system_kill(_ pid: pid_t, _ signal: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("kill", [Int(pid), Int(signal)]) { return CInt(value) }
    #endif
    return kill(pid, signal)
}

@inline(never)
public func system_flock(_ fd: CInt, _ operation: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("flock", [Int(fd), Int(operation)]) { return CInt(value) }
    #endif
    return flock(fd, operation)
}

/// Signals to other processes.
public enum ProcessSignal {
    /// SIGKILL to `pid`: ends a child that stopped answering, also a stopped one (SIGTERM waits for SIGCONT). ESRCH
    /// (it has exited meanwhile) is success.
    public static func killNow(_ pid: pid_t) throws(Errno) {
        switch valueOrErrno({ system_kill(pid, SIGKILL) }) {
        case .success: return
        case .failure(let error) where error == .noSuchProcess: return
        case .failure(let error): throw error
        }
    }

    /// Whether `pid` is a live process (kill(pid, 0): EPERM means it exists under another user).
    public static func isAlive(_ pid: pid_t) -> Bool {
        switch valueOrErrno({ system_kill(pid, 0) }) {
        case .success: return true
        case .failure(let error): return error != .noSuchProcess
        }
    }
}

/// An exclusive advisory lock on a file (flock(2)) that several processes use to take turns: the lock ends with the
/// descriptor, so a process that dies holding it frees it.
public final class FileLock: Sendable {
    public let path: String
    private let fd: CInt

    /// Opens (creating, mode 0666 less the umask) the lock file.
    public init(path: String) throws(Errno) {
        self.path = path
        fd = try valueOrErrno { system_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o666) }.get()
    }

    deinit { _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) } }

    /// Takes the lock if nobody holds it; false when another descriptor holds it.
    public func tryLock() throws(Errno) -> Bool {
        switch valueOrErrno({ system_flock(fd, LOCK_EX | LOCK_NB) }) {
        case .success: return true
        case .failure(let error) where error == .wouldBlock: return false
        case .failure(let error): throw error
        }
    }

    public func unlock() {
        _ = valueOrErrno { system_flock(fd, LOCK_UN) }  // closing the descriptor would release it too
    }
}
