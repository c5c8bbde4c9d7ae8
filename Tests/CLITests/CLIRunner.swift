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

    /// Runs the child and awaits it on the reactor (LinuxIO's ChildProcess: its output read and its exit noticed
    /// without holding a thread; the test's task gives its cooperative thread back while the child runs). Waiting for
    /// a child on a cooperative thread takes one of the pool's threads (as many as the machine has cores) for the
    /// child's whole run; two such waits on a two-core machine stopped every other test of the process, whose clocks
    /// went on running (docs/reliability.md, "Starved pool"). Foundation's Process and Pipe are not used: a `try!`
    /// inside FileHandle crashed the test process (SIGABRT) twice in stress runs.
    @discardableResult
    static func run(
        _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60, executable: URL? = nil
    ) async throws -> Result {
        let (child, out, err) = try start(arguments, environment: environment, executable: executable)
        defer {
            out.close()
            err.close()
        }
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(Int64(timeout * 1000)))
        async let outBytes = collect(out, until: deadline)
        async let errBytes = collect(err, until: deadline)
        let (stdout, stderr) = await (outBytes, errBytes)
        var exit = await child.wait(timeout: max(.zero, ContinuousClock.now.duration(to: deadline)))
        if exit == nil {
            Issue.record("bledfu \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
            exit = await child.end(grace: .zero, killGrace: .seconds(30))
        }
        return Result(
            status: exit?.code ?? -1, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Like ``run(_:environment:timeout:executable:)``, blocking the calling thread: only for synchronous code that
    /// cannot await (a polled condition). Reads both pipes on threads of their own and polls for the exit.
    @discardableResult
    static func runBlocking(
        _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60, executable: URL? = nil
    ) throws -> Result {
        let (child, out, err) = try start(arguments, environment: environment, executable: executable)
        defer {
            out.close()
            err.close()
        }
        let deadline = Date().addingTimeInterval(timeout)
        let outData = BlockingCollector(out.fd)
        let errData = BlockingCollector(err.fd)
        while child.exit == nil && Date() < deadline { usleep(10_000) }
        if child.exit == nil {
            child.signal(SIGKILL)
            Issue.record("bledfu \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
            while child.exit == nil { usleep(10_000) }  // SIGKILL: gone within moments
        }
        return Result(
            status: child.exit?.code ?? -1, stdout: String(decoding: outData.wait(), as: UTF8.self),
            stderr: String(decoding: errData.wait(), as: UTF8.self))
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

    /// Everything a pipe carries until its end or the deadline.
    static func collect(_ reader: PipeReader, until deadline: ContinuousClock.Instant) async -> [UInt8] {
        var all: [UInt8] = []
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero, let chunk = try? await reader.read(timeout: remaining), !chunk.isEmpty else { return all }
            all += chunk
        }
    }

    /// Runs a system tool and returns its standard output.
    static func runTool(_ path: String, _ arguments: [String]) throws -> String {
        try runBlocking(arguments, timeout: 120, executable: URL(fileURLWithPath: path)).stdout
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

/// Reads a (non-blocking) descriptor to its end on a thread of its own, waiting with poll(2) between reads.
final class BlockingCollector: Sendable {
    private let bytes = Mutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)

    init(_ fd: CInt) {
        let thread = Thread { [self] in
            var all: [UInt8] = []
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while true {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    all += buffer[..<count]
                } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                    break
                } else {
                    _ = poll(&entry, 1, 1000)
                }
            }
            self.bytes.withLock { $0 = all }
            self.done.signal()
        }
        thread.start()
    }

    /// The bytes, once the descriptor reached its end.
    func wait() -> [UInt8] {
        done.wait()
        return bytes.withLock { $0 }
    }
}
