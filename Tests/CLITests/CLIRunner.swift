import Foundation
import LinuxIO
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `bledfu` binary (built next to the test bundle) and captures its output.
struct CLIRunner {
    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
        var errorLines: [String] { stderr.split(separator: "\n").map(String.init) }
    }

    static var binary: URL {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = testBinary.deletingLastPathComponent()
        // On Linux the test runner is `.build/<triple>/debug/bledfuPackageTests.xctest`.
        if directory.pathExtension == "xctest" { directory = directory.deletingLastPathComponent() }
        return directory.appendingPathComponent("bledfu")
    }

    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// `out/` at the repository's root (ignored by git): screenshots and other artefacts a test keeps.
    static var outputDirectory: URL { repositoryRoot.appendingPathComponent("out") }

    /// Runs the child and awaits it off the cooperative pool: its pipes are read and its exit awaited on threads of
    /// their own (`OffPool`, `BlockingCollector`), so the test's task gives its cooperative thread back while the child
    /// runs and the reading does not depend on the pool either. Waiting for a child on a cooperative thread takes one
    /// of the pool's threads (as many as the machine has cores) for the child's whole run; two such waits on a
    /// two-core machine stopped every other test of the process, whose clocks went on running (docs/reliability.md,
    /// "Starved pool"); and reads resumed on the pool starve with it (a full run lost the output of children that had
    /// exited). Foundation's Process and Pipe are not used: a `try!` inside FileHandle crashed the test process
    /// (SIGABRT) twice in stress runs.
    @discardableResult
    static func run(
        _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60, executable: URL? = nil
    ) async throws -> Result {
        try await OffPool.run {
            try runBlocking(arguments, environment: environment, timeout: timeout, executable: executable)
        }
    }

    /// Like ``run(_:environment:timeout:executable:)``, blocking the calling thread: only on a thread of its own
    /// (``OffPool/run(_:)``). Reads both pipes on threads of their own and polls for the exit (at most
    /// `timeout`, then SIGKILL); what the pipes hold is read to their end (at most 60 s more).
    @discardableResult
    static func runBlocking(
        _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60, executable: URL? = nil
    ) throws -> Result {
        // The collectors own the read ends: each closes its own once it reached the end.
        let (child, out, err) = try start(arguments, environment: environment, executable: executable)
        let deadline = Date().addingTimeInterval(timeout)
        let outData = BlockingCollector(out.fd)
        let errData = BlockingCollector(err.fd)
        OffPool.blockingPoll(seconds: deadline.timeIntervalSinceNow) { child.exit != nil }
        if child.exit == nil {
            child.signal(SIGKILL)
            Issue.record("bledfu \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
            OffPool.blockingPoll(seconds: 60) { child.exit != nil }  // SIGKILL: gone within moments
        }
        let drain = Date().addingTimeInterval(60)
        return Result(
            status: child.exit?.code ?? -1, stdout: String(decoding: outData.wait(until: drain), as: UTF8.self),
            stderr: String(decoding: errData.wait(until: drain), as: UTF8.self))
    }

    /// Starts the binary (or `executable`) with its standard output and error on pipes.
    static func start(
        _ arguments: [String], environment: [String: String] = [:], executable: URL? = nil
    ) throws -> (ChildProcess, PipeReader, PipeReader) {
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let out = try ChildProcess.makePipe()
        let err = try ChildProcess.makePipe()
        defer {
            _ = system_close(out.write)
            _ = system_close(err.write)
        }
        let child = try ChildProcess.spawn(
            (executable ?? binary).path, arguments: arguments, environment: env, standardOutput: .descriptor(out.write),
            standardError: .descriptor(err.write), ownProcessGroup: false)
        return (child, try PipeReader(fd: out.read), try PipeReader(fd: err.read))
    }

    /// Runs a system tool to its end off the pool (``run(_:environment:timeout:executable:)``) and returns its
    /// standard output.
    static func runTool(_ path: String, _ arguments: [String]) async throws -> String {
        try await run(arguments, timeout: 120, executable: URL(fileURLWithPath: path)).stdout
    }

    /// True when this kernel has no AF_BLUETOOTH (as on the build machines).
    static var kernelHasNoBluetooth: Bool {
        let fd = socket(31, Int32(SOCK_SEQPACKET.rawValue), 0)
        if fd >= 0 {
            close(fd)
            return false
        }
        return errno == EAFNOSUPPORT
    }
}
