import Foundation
import LinuxIO
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// LinuxIO's child processes (posix_spawn, pidfd on the reactor, bounded waits): real children of /bin/sh.
@Suite("Child processes: posix_spawn, pidfd, deadlines", .timeLimit(.minutes(3)))
struct ChildProcessTests {
    /// `/bin/sh -c script` with its standard output on a pipe; returns the child and the reader.
    static func shell(_ script: String, stderr: ChildProcess.Redirect = .null) throws -> (ChildProcess, PipeReader) {
        let pipe = try ChildProcess.makePipe()
        defer { _ = system_close(pipe.write) }
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["-c", script], standardOutput: .descriptor(pipe.write), standardError: stderr)
        return (child, try PipeReader(fd: pipe.read))
    }

    @Test("Output and exit code of a child, read and reaped on the reactor")
    func outputAndExitCode() async throws {
        let (child, reader) = try Self.shell("echo one; echo two; exit 3")
        let output = try await reader.readToEnd(idle: .seconds(60))
        reader.close()
        #expect(String(decoding: output, as: UTF8.self) == "one\ntwo\n")
        #expect(await child.wait(timeout: .seconds(60)) == .exited(3))
        #expect(child.exit == .exited(3))
        #expect(ChildExit.exited(3).code == 3)
    }

    @Test("A child that does not exit: the wait ends at its deadline; end() kills and reaps it (SIGKILL, 137)")
    func waitHasADeadline() async throws {
        let (child, reader) = try Self.shell("exec sleep 600")
        defer { reader.close() }
        #expect(await child.wait(timeout: .milliseconds(300)) == nil)
        #expect(child.exit == nil)
        let ended = await child.end(grace: .zero, killGrace: .seconds(60))
        #expect(ended == .signalled(SIGKILL))
        #expect(ended?.code == 137)
        // The output ends with the child: a read with no writer left sees end of file.
        #expect(try await reader.read(timeout: .seconds(60)).isEmpty)
    }

    @Test("A silent writer: the read ends with ETIMEDOUT at its deadline")
    func readHasADeadline() async throws {
        let (child, reader) = try Self.shell("exec sleep 600")
        defer { reader.close() }
        await #expect(throws: Errno.timedOut) { _ = try await reader.read(timeout: .milliseconds(200)) }
        _ = await child.end(grace: .zero)
    }

    @Test("The child runs in a process group of its own, with default signal actions and no blocked signal")
    func ownGroupAndDefaultSignals() async throws {
        // A parent that ignores a signal (as bledfu does with SIGINT while it handles Ctrl-C) does not pass that on.
        system_setSignalIgnored(SIGUSR2, true)
        defer { system_setSignalIgnored(SIGUSR2, false) }
        let (child, reader) = try Self.shell("cat /proc/self/stat; grep -E '^Sig(Ign|Blk):' /proc/self/status")
        let text = String(decoding: try await reader.readToEnd(idle: .seconds(60)), as: UTF8.self)
        reader.close()
        #expect(await child.wait(timeout: .seconds(60)) == .exited(0))
        // /proc/PID/stat of `cat`, the shell's child: "pid (comm) state ppid pgrp ...". Its group is the one the
        // spawned shell leads (the child's pid), not this process's.
        let stat = try #require(text.split(separator: "\n").first).split(separator: " ")
        #expect(stat.count > 4)
        #expect(stat[4] == "\(child.pid)", "process group \(stat[4]) is not the child's own (\(child.pid))")
        #expect(stat[4] != "\(getpgrp())")
        let ignored = try #require(text.split(separator: "\n").first { $0.hasPrefix("SigIgn:") })
        let mask = try #require(UInt64(ignored.split(separator: "\t").last ?? "", radix: 16))
        #expect(mask & (1 << (UInt64(SIGUSR2) - 1)) == 0, "SIGUSR2 still ignored in the child: \(ignored)")
        let blocked = try #require(text.split(separator: "\n").first { $0.hasPrefix("SigBlk:") })
        #expect(UInt64(blocked.split(separator: "\t").last ?? "", radix: 16) == 0)
    }

    @Test("A descriptor this process opened without O_CLOEXEC does not reach the child")
    func noInheritedDescriptors() async throws {
        var pair: [CInt] = [-1, -1]
        #expect(pipe(&pair) == 0)  // no O_CLOEXEC: as Foundation or a C library may open one
        // Copies at 100 and above (F_DUPFD, no O_CLOEXEC either), far from the few the child opens itself.
        let fds = [system_fcntl(pair[0], F_DUPFD, 100), system_fcntl(pair[1], F_DUPFD, 100)]
        defer { for fd in pair + fds { _ = system_close(fd) } }
        #expect(fds.allSatisfy { $0 >= 100 })
        let (child, reader) = try Self.shell("ls /proc/self/fd")
        let listed = String(decoding: try await reader.readToEnd(idle: .seconds(60)), as: UTF8.self)
        reader.close()
        #expect(await child.wait(timeout: .seconds(60)) == .exited(0))
        let numbers = Set(listed.split(separator: "\n").compactMap { CInt($0) })
        #expect(!numbers.contains(fds[0]) && !numbers.contains(fds[1]), "the child has \(numbers.sorted()); leaked: \(fds)")
    }

    @Test("SIGINT ends a child at its default action: signalled(2), code 130")
    func interruptedChild() async throws {
        let (child, reader) = try Self.shell("exec sleep 600")
        defer { reader.close() }
        child.signal(SIGINT)
        #expect(await child.wait(timeout: .seconds(60)) == .signalled(SIGINT))
        #expect(child.exit?.code == 130)
        child.signal(SIGKILL)  // reaped: no signal reaches a pid that may be reused
    }

    @Test("No executable: a typed error naming it and the errno")
    func missingExecutable() {
        #expect(throws: ChildProcessError.self) {
            _ = try ChildProcess.spawn("/nonexistent/bledfu-no-such-tool", arguments: [])
        }
        do {
            _ = try ChildProcess.spawn("/nonexistent/bledfu-no-such-tool", arguments: [])
        } catch {
            #expect(error.errno == .noSuchFileOrDirectory)
            #expect(error.message.contains("/nonexistent/bledfu-no-such-tool"))
        }
    }

    @Test("Environment given: the child sees exactly it")
    func environment() async throws {
        let pipe = try ChildProcess.makePipe()
        let child = try ChildProcess.spawn(
            "/usr/bin/env", arguments: [], environment: ["BLEDFU_A": "1", "BLEDFU_B": "two"], standardOutput: .descriptor(pipe.write))
        _ = system_close(pipe.write)
        let reader = try PipeReader(fd: pipe.read)
        let text = String(decoding: try await reader.readToEnd(idle: .seconds(60)), as: UTF8.self)
        reader.close()
        #expect(await child.wait(timeout: .seconds(60)) == .exited(0))
        #expect(text == "BLEDFU_A=1\nBLEDFU_B=two\n")
    }

    #if ENABLE_MOCKING
    @Test("Without pidfd_open (ENOSYS, kernels before 5.3) a reaper thread notices the exit, on the same deadlines")
    func reaperThreadWithoutPidfd() async throws {
        let pipe = try ChildProcess.makePipe()
        defer { _ = system_close(pipe.read) }
        let mock = SyscallMock(script: [.passthrough("posix_spawn"), .fails("pidfd_open", .noFunction)], passthroughWhenExhausted: true)
        let child = try mock.run { () throws(ChildProcessError) in
            try ChildProcess.spawn("/bin/sh", arguments: ["-c", "exit 7"], standardOutput: .descriptor(pipe.write))
        }
        _ = system_close(pipe.write)
        #expect(mock.callNames.prefix(3) == ["posix_spawn", "pidfd_open", "pipe2"])
        #expect(mock.violations.isEmpty)
        #expect(await child.wait(timeout: .seconds(60)) == .exited(7))
        let again = SyscallMock(
            script: [.passthrough("pipe2"), .passthrough("posix_spawn"), .fails("pidfd_open", .noFunction), .passthrough("pipe2")],
            passthroughWhenExhausted: true)
        let (sleeper, reader) = try again.run { () throws in try Self.shell("exec sleep 600") }
        #expect(again.callNames.prefix(4) == ["pipe2", "posix_spawn", "pidfd_open", "pipe2"])
        defer { reader.close() }
        #expect(await sleeper.wait(timeout: .milliseconds(200)) == nil)
        #expect(await sleeper.end(grace: .zero, killGrace: .seconds(60)) == .signalled(SIGKILL))
    }

    @Test("posix_spawn failing (EAGAIN: out of processes) is a typed spawn error")
    func spawnFailure() {
        let mock = SyscallMock(script: [.fails("posix_spawn", .resourceTemporarilyUnavailable)])
        do {
            _ = try mock.run { () throws(ChildProcessError) in try ChildProcess.spawn("/bin/true", arguments: []) }
            Issue.record("spawn succeeded")
        } catch {
            #expect(error.code == .spawn)
            #expect(error.errno == .resourceTemporarilyUnavailable)
        }
    }
    #endif
}
