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

@inline(never)
public func system_fstat(_ fd: CInt, _ buffer: UnsafeMutablePointer<stat>) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("fstat", [Int(fd)]) { return CInt(value) }
    #endif
    return fstat(fd, buffer)
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

    /// Whether `pid` is stopped (SIGSTOP, Ctrl-Z, a debugger): state T or t in /proc/PID/stat ("PID (comm) T ...";
    /// the command name may hold spaces and parentheses, so the state is the first field after the last ')').
    public static func isStopped(_ pid: pid_t) -> Bool {
        guard let bytes = try? FileIO.read("/proc/\(pid)/stat") else { return false }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return false }
        let state = text[text.index(after: close)...].split(separator: " ").first
        return state == "T" || state == "t"
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

    /// The processes holding a flock on this lock file now, from /proc/locks
    /// ("16: FLOCK  ADVISORY  WRITE 29800 fe:00:16236926 0 EOF": the holder's pid, then device and inode; a waiter's
    /// line has "->" in the second field and is not a holder). Matched by inode only. Empty when unknown.
    public func holders() -> [pid_t] {
        var info = stat()
        guard system_fstat(fd, &info) == 0, let bytes = try? FileIO.read("/proc/locks") else { return [] }
        let inode = UInt64(info.st_ino)
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line -> pid_t? in
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", let pid = pid_t(fields[4]),
                let number = fields[5].split(separator: ":").last, UInt64(number) == inode
            else { return nil }
            return pid
        }
    }

    public func unlock() {
        _ = valueOrErrno { system_flock(fd, LOCK_UN) }  // closing the descriptor would release it too
    }
}
