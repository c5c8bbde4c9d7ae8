import Foundation
import Testing

/// A `bledfu simulate` child process on a temporary virtual radio directory. Its output goes to files (a chatty
/// child can never block on a pipe). Always `stop()` it (or let `deinit` kill it) at the end of a test.
final class SimulatorProcess {
    let radio: URL
    let process = Process()
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
        _ = FileManager.default.createFile(atPath: stdoutFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process.executableURL = CLIRunner.binary
        process.arguments = ["simulate", "--adapter", "virtual:\(directory.path)"] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["BLEDFU_FIRMWARE_DIR"] = CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path
        process.environment = environment
        process.standardOutput = try FileHandle(forWritingTo: stdoutFile)
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        try process.run()
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    var stdout: String { (try? String(contentsOf: stdoutFile, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    /// Files in the radio directory with this suffix.
    func files(_ suffix: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: radio.path)) ?? []).filter { $0.hasSuffix(suffix) }
            .sorted()
    }

    /// Polls `condition` every 10 ms for at most `timeout` seconds (or until the child exits); true once it holds.
    @discardableResult
    func waitUntil(timeout: TimeInterval = 30, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            if !process.isRunning { return condition() }
            usleep(10_000)
        }
        return condition()
    }

    /// Sends `signal` and waits (bounded) for the exit; returns the exit status, nil when it did not exit.
    func stop(signal: Int32 = SIGINT, timeout: TimeInterval = 20) -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        guard !process.isRunning else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Kills the child if still running and removes the radio directory.
    func cleanUp() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: radio)
    }
}
