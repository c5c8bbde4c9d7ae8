#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// Process control, in the style of Syscalls.swift (one thin wrapper per call, answered by SyscallMock in tests).

@inline(never)
public func system_kill(_ pid: pid_t, _ signal: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("kill", [Int(pid), Int(signal)]) { return CInt(value) }
    #endif
    return kill(pid, signal)
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
}
