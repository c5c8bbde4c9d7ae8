import Foundation
import LinuxIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A child process for tests: LinuxIO's ChildProcess (posix_spawn, reaped by bledfu's own code) with the few
/// Process-like calls the tests use. Its output goes to files: a chatty child can never block on a pipe. Foundation's
/// Process and FileHandle are not used: a `try!` inside FileHandle crashed the test process twice in stress runs.
final class SpawnedProcess: Sendable {
    let child: ChildProcess

    /// Starts `executable`; standard output and error to these files (created or truncated), else /dev/null.
    init(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil, stdout: URL? = nil, stderr: URL? = nil) throws {
        let out = try stdout.map { try FileIO.create($0.path) }
        // The same file for both: one descriptor (one offset), as a shell's 2>&1.
        let err = stderr == stdout ? out : try stderr.map { try FileIO.create($0.path) }
        defer {
            if let out { try? FileIO.close(out) }
            if let err, err != out { try? FileIO.close(err) }
        }
        child = try ChildProcess.spawn(
            executable.path, arguments: arguments, environment: environment, standardOutput: out.map { .descriptor($0) } ?? .null,
            standardError: err.map { .descriptor($0) } ?? .null, ownProcessGroup: false)
    }

    var isRunning: Bool { child.exit == nil }
    var processIdentifier: Int32 { child.pid }
    /// The exit code (128 + signal for a killed child); -1 while it runs.
    var terminationStatus: Int32 { child.exit?.code ?? -1 }

    func terminate() { child.signal(SIGTERM) }

    /// Awaits the exit on the reactor (no thread held), at most `timeout` s, then SIGKILL.
    func waitForExit(timeout: TimeInterval = 60) async {
        await child.waitForExit(timeout: .seconds(timeout))
    }
}

/// A `bledfu simulate` child process on a temporary virtual radio directory. Its output goes to files (a chatty
/// child can never block on a pipe). Always `stop()` it (or let `deinit` kill it) at the end of a test.
final class SimulatorProcess {
    let radio: URL
    let process: SpawnedProcess
    let stdoutFile: URL
    let stderrFile: URL

    /// Starts `bledfu simulate --adapter virtual:<radio> <arguments>`.
    init(_ arguments: [String], radio: URL? = nil) throws {
        let directory =
            radio ?? URL(fileURLWithPath: "/tmp").appendingPathComponent("bledfu-sim-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.radio = directory
        stdoutFile = directory.appendingPathComponent("simulate.out")
        stderrFile = directory.appendingPathComponent("simulate.err")
        var environment = ProcessInfo.processInfo.environment
        environment["BLEDFU_FIRMWARE_DIR"] = CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path
        process = try SpawnedProcess(
            CLIRunner.binary, ["simulate", "--adapter", "virtual:\(directory.path)"] + arguments, environment: environment,
            stdout: stdoutFile, stderr: stderrFile)
    }

    // Bounded (a SIGTERM'd child's exit, at most 10 s): deinit cannot await.
    deinit { process.child.terminateBlocking() }

    var stdout: String { (try? String(contentsOf: stdoutFile, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    /// Files in the radio directory with this suffix.
    func files(_ suffix: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: radio.path)) ?? []).filter { $0.hasSuffix(suffix) }
            .sorted()
    }

    /// Polls `condition` every 10 ms for at most `timeout` seconds (or until the child exits); true once it holds.
    @discardableResult
    func waitUntil(timeout: TimeInterval = 30, _ condition: () async -> Bool) async -> Bool {
        await OffPool.poll(timeout: .seconds(timeout)) { await condition() || !process.isRunning }
        return await condition()
    }

    /// Sends `signal` and awaits (bounded) the exit; returns the exit status, nil when it did not exit.
    func stop(signal: Int32 = SIGINT, timeout: TimeInterval = 20) async -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        process.child.signal(signal)
        guard await process.child.wait(timeout: .seconds(timeout)) != nil else { return nil }
        return process.terminationStatus
    }

    /// Kills the child if still running (SIGTERM, bounded: called from `defer`) and removes the radio directory.
    func cleanUp() {
        process.child.terminateBlocking()
        try? FileManager.default.removeItem(at: radio)
    }
}
