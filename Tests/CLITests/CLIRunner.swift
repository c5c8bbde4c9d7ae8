import Foundation
import LinuxIO
import Testing

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

    /// Runs the child on a thread of its own and awaits it there: the test's task gives its cooperative thread back
    /// while the child runs. Waiting for a child on a cooperative thread (`runBlocking`) takes one of the pool's
    /// threads (as many as the machine has cores) for the child's whole run; two such waits on a two-core machine
    /// stopped every other test of the process, whose clocks went on running (docs/reliability.md, "Starved pool").
    @discardableResult
    static func run(
        _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60, executable: URL? = nil
    ) async throws -> Result {
        try await OffPool.run {
            try runBlocking(arguments, environment: environment, timeout: timeout, executable: executable)
        }
    }

    /// Like ``run(_:environment:timeout:executable:)``, blocking the calling thread: only for synchronous code that
    /// cannot await (a polled condition).
    @discardableResult
    static func runBlocking(
        _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60, executable: URL? = nil
    ) throws -> Result {
        let process = Process()
        process.executableURL = executable ?? binary
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        // Drain both pipes while waiting so a chatty child cannot block on a full pipe.
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data()
        nonisolated(unsafe) var errData = Data()
        group.enter()
        DispatchQueue.global().async {
            outData = Data((try? BlockingRead.toEnd(fd: out.fileHandleForReading.fileDescriptor)) ?? [])
            group.leave()
        }
        group.enter()
        DispatchQueue.global().async {
            errData = Data((try? BlockingRead.toEnd(fd: err.fileHandleForReading.fileDescriptor)) ?? [])
            group.leave()
        }
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            Issue.record("bledfu \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
        }
        process.waitUntilExit()
        group.wait()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
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
