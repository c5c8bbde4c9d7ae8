#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import BLECore
import CLinuxShim
import Foundation
import Synchronization
import SystemPackage

/// How a child process ended.
public enum ChildExit: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)

    /// The shell's convention: the exit code, or 128 + the signal (SIGINT: 130, SIGKILL: 137).
    public var code: Int32 {
        switch self {
        case .exited(let code): return code
        case .signalled(let signal): return 128 + signal
        }
    }

    /// From a waitpid(2) status word.
    public init(status: CInt) {
        let signal = status & 0x7f
        self = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
    }

    public var description: String {
        switch self {
        case .exited(let code): return "exit code \(code)"
        case .signalled(let signal): return "signal \(signal)"
        }
    }
}

/// A child process that could not be started.
public struct ChildProcessError: CodedError {
    public enum Code: String, Sendable {
        /// posix_spawn failed (no such executable, not executable, out of processes).
        case spawn = "spawn-failed"
        /// A pipe or a redirected file could not be opened.
        case descriptor = "descriptor-failed"
    }

    public var code: Code
    public var message: String
    public var errno: Errno?

    public init(_ code: Code, _ message: String, errno: Errno? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }
}

/// A child process started with posix_spawn(3) and reaped by bledfu itself, never by Foundation's `Process` (which
/// needs a CFSocket wake-up pair on 127.0.0.1: with the loopback interface down its children's exits went unnoticed
/// and `bledfu batch` waited forever; docs/reliability.md).
///
/// The child starts with every signal at its default action and none blocked (a parent that ignores SIGINT to handle
/// it itself does not pass that on), in a process group of its own by default (the terminal's Ctrl-C reaches the
/// parent alone, which decides what its children get). Its exit is noticed through a pidfd (pidfd_open(2), Linux
/// 5.3) on the ``Reactor``, or, where the kernel has none, through a thread of its own blocked in waitpid(2) that
/// closes a pipe the reactor watches. Every wait has a deadline; a child never reaped by a wait is reaped when this
/// object goes away.
public final class ChildProcess: Sendable {
    /// Where one of the child's standard descriptors comes from.
    public enum Redirect: Sendable {
        /// /dev/null.
        case null
        /// This process's own descriptor of the same number.
        case inherit
        /// The given descriptor (the caller keeps it and closes it after the spawn).
        case descriptor(CInt)
    }

    public let pid: pid_t
    /// Readable once the child has exited: its pidfd, or the read end of the reaper thread's pipe.
    private let exitFD: CInt
    private let reaperThread: Bool
    /// The exit, once reaped. Also the lock that keeps a signal from reaching a pid already reaped (and reused).
    private let reaped: Mutex<ChildExit?>

    private init(pid: pid_t, exitFD: CInt, reaperThread: Bool) {
        self.pid = pid
        self.exitFD = exitFD
        self.reaperThread = reaperThread
        self.reaped = Mutex(nil)
    }

    deinit {
        Reactor.shared.cancelWaits(on: exitFD)
        _ = valueOrErrno(retryOnInterrupt: false) { system_close(exitFD) }
        guard !reaperThread, reaped.withLock({ $0 }) == nil else { return }
        // Nobody waited for it to the end: reap it when it exits, so it never stays a zombie.
        let pid = self.pid
        let thread = Thread {
            var status: CInt = 0
            _ = valueOrErrno { system_waitpid(pid, &status, 0) }
        }
        thread.name = "bledfu-reap-\(pid)"
        thread.start()
    }

    /// Starts `executable` (a path; no PATH search) with `arguments` (without argv[0], which is the path).
    /// - Parameter environment: nil for this process's own.
    public static func spawn(
        _ executable: String, arguments: [String], environment: [String: String]? = nil,
        standardInput: Redirect = .null, standardOutput: Redirect = .inherit, standardError: Redirect = .inherit,
        ownProcessGroup: Bool = true
    ) throws(ChildProcessError) -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, redirect) in [(CInt(0), standardInput), (1, standardOutput), (2, standardError)] {
            switch redirect {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, target)
            }
        }
        // Nothing else of this process reaches the child: descriptors other code opened without O_CLOEXEC (a file
        // being written, which the child's exec of it would then refuse with ETXTBSY; a pipe's write end, whose reader
        // would never see end of file) are closed in the child before exec. A glibc before 2.34 has no closefrom
        // action: the child then relies on O_CLOEXEC alone.
        _ = bledfu_spawn_addclosefrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var flags = CInt(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= CInt(POSIX_SPAWN_SETPGROUP)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let argv = CStringArray([executable] + arguments)
        let envp = environment.map { CStringArray($0.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }) }
        var pid: pid_t = 0
        let result = argv.withPointer { argvPointer in
            if let envp {
                return envp.withPointer { system_posix_spawn(&pid, executable, &actions, &attributes, argvPointer, $0) }
            }
            return system_posix_spawn(&pid, executable, &actions, &attributes, argvPointer, environ)
        }
        guard result == 0 else {
            let error = Errno(rawValue: result)
            throw ChildProcessError(.spawn, "cannot start \(executable): \(error)", errno: error)
        }
        return try watch(pid)
    }

    /// The exit descriptor of a child just spawned: its pidfd, or a reaper thread's pipe.
    private static func watch(_ pid: pid_t) throws(ChildProcessError) -> ChildProcess {
        if case .success(let pidfd) = valueOrErrno({ system_pidfd_open(pid, 0) }) {
            return ChildProcess(pid: pid, exitFD: pidfd, reaperThread: false)
        }
        // No pidfd (a kernel before 5.3): a thread blocked in waitpid closes the write end when the child is reaped.
        let ends: (read: CInt, write: CInt)
        do throws(Errno) {
            ends = try makePipe()
        } catch {
            // The child runs; without a way to wait for it, kill and reap it rather than leave it unwatched.
            _ = valueOrErrno { system_kill(pid, SIGKILL) }
            var status: CInt = 0
            _ = valueOrErrno { system_waitpid(pid, &status, 0) }
            throw ChildProcessError(.descriptor, "cannot watch child \(pid): pipe2: \(error)", errno: error)
        }
        let child = ChildProcess(pid: pid, exitFD: ends.read, reaperThread: true)
        let write = ends.write
        let thread = Thread { [child] in
            var status: CInt = 0
            if case .success = valueOrErrno({ system_waitpid(pid, &status, 0) }) {
                child.reaped.withLock { $0 = ChildExit(status: status) }
            }
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(write) }
        }
        thread.name = "bledfu-wait-\(pid)"
        thread.start()
        return child
    }

    /// A pipe whose ends are close-on-exec (a child gets one only through a ``Redirect``).
    public static func makePipe() throws(Errno) -> (read: CInt, write: CInt) {
        var fds: [CInt] = [-1, -1]
        _ = try valueOrErrno { system_pipe2(&fds, O_CLOEXEC) }.get()
        return (fds[0], fds[1])
    }

    /// The exit, if the child has ended (reaps it).
    public var exit: ChildExit? {
        reaped.withLock { exit -> ChildExit? in
            if let exit { return exit }
            guard !reaperThread else { return nil }
            var status: CInt = 0
            guard case .success(let value) = valueOrErrno({ system_waitpid(pid, &status, WNOHANG) }), value == pid else {
                return nil
            }
            exit = ChildExit(status: status)
            return exit
        }
    }

    /// Sends `signal` unless the child has been reaped already (its pid may belong to another process by then).
    public func signal(_ signal: CInt) {
        reaped.withLock { exit in
            guard exit == nil else { return }
            // ESRCH: it has just exited (a zombie until reaped); nothing else can fail for our own child.
            _ = valueOrErrno { system_kill(pid, signal) }
        }
    }

    /// Waits up to `timeout` for the child to end; nil when it is still running then (or the task was cancelled).
    public func wait(timeout: Duration) async -> ChildExit? {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while true {
            if let exit { return exit }
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return nil }
            #if ENABLE_MOCKING
            if let mock = SyscallMock.current {
                mock.recordWait("waitExit", fd: exitFD)
                continue
            }
            #endif
            do throws(Errno) {
                try await Reactor.shared.wait(for: exitFD, readable: true, timeout: remaining)
            } catch {
                // ETIMEDOUT: the deadline passed; ECANCELED: the task was cancelled. One last look either way.
                return exit
            }
        }
    }

    /// Ends the child within bounded time: waits `grace` for it to exit on its own, then sends SIGKILL and waits up
    /// to `killGrace` more (SIGKILL ends even a stopped process; one stuck in the kernel may take longer). Nil when
    /// it still has not exited: it is reaped when it does.
    public func end(grace: Duration, killGrace: Duration = .seconds(10)) async -> ChildExit? {
        if let exit = await wait(timeout: grace) { return exit }
        signal(SIGKILL)
        return await wait(timeout: killGrace)
    }
}

/// A NULL-terminated array of C strings (argv, envp) that lives as long as the value.
private final class CStringArray {
    private var pointers: [UnsafeMutablePointer<CChar>?]

    init(_ strings: [String]) {
        pointers = strings.map { strdup($0) } + [nil]
    }

    deinit {
        for pointer in pointers { free(pointer) }
    }

    func withPointer<R>(_ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        pointers.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { preconditionFailure("the array holds at least its terminating nil") }
            return body(base)
        }
    }
}
