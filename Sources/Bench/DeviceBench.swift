import Batch
import Foundation
import LinuxIO
import SystemPackage

/// `bledfu bench --device ADDR --package ZIP`: each mode, `repetitions` times, as a complete `bledfu flash` run (a
/// child process of ``executable``, so connect, buttonless jump, reconnects and journal behave exactly as in a real
/// update). The device must accept the package again after each run (same or higher version). Throughput is the
/// package's image bytes over the run's wall time. The ceiling and the protocol bound come from the link the run
/// got, as for a virtual cell (``DeviceLink``): interval, PHY and data length from the child's "link: ..." line, the
/// ATT_MTU and the packets per connection event from its ATT capture (``DeviceCapture``; `--capture` in a
/// temporary directory). A run without a link line (an unprivileged run) has no ceiling.
public struct DeviceBench: Sendable {
    /// The `bledfu` binary each run starts.
    public var executable: URL
    public var address: String
    public var package: String
    /// The package's image bytes (every part's), the numerator of each run's throughput.
    public var imageBytes: Int
    public var adapter: String
    public var modes: [String]
    public var repetitions: Int

    public init(
        executable: URL, address: String, package: String, imageBytes: Int, adapter: String, modes: [String], repetitions: Int
    ) {
        self.executable = executable
        self.address = address
        self.package = package
        self.imageBytes = imageBytes
        self.adapter = adapter
        self.modes = modes
        self.repetitions = repetitions
    }

    /// The longest a bench run may go without a line on standard error before it is killed.
    public static let runLimit: Duration = .seconds(1800)

    /// Every mode, `repetitions` times; `emit` hears each run as it ends. Throws ``BenchError/Code/flashStart`` when
    /// a child cannot be started.
    public func run(_ emit: (BenchRun) -> Void) async throws(BenchError) -> [BenchRun] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-bench-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var runs: [BenchRun] = []
        for repetition in 1...max(1, repetitions) {
            for mode in modes {
                let capture = directory.appendingPathComponent("\(mode)-\(repetition).btsnoop").path
                let arguments = [
                    "flash", package, "--device", address, "--adapter", adapter, "--mode", mode, "--json",
                    "--capture", capture,
                ]
                let start = ContinuousClock.now
                let (status, errors) = try await Self.launch(executable, arguments)
                let elapsed = start.duration(to: .now)
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                let completed = status == 0
                var run = BenchRun(mode: mode, profile: "device \(address)", imageBytes: imageBytes, repetition: repetition)
                run.finish(seconds: seconds, completed: completed)
                // `bledfu flash` succeeds only after the device executed the last object and its hash check.
                run.imageCorrect = completed
                let lastError = errors.split(separator: "\n").last.map(String.init) ?? ""
                run.error = completed ? nil : "exit \(status): \(lastError)"
                if let link = Self.link(errors: errors, capturePath: capture) { link.fill(&run) }
                emit(run)
                runs.append(run)
            }
        }
        return runs
    }

    /// The link a run got: the child's "link: ..." line and its capture (nil without a line).
    public static func link(errors: String, capturePath: String) -> DeviceLink? {
        let capture = FileManager.default.contents(atPath: capturePath).flatMap { try? DeviceCapture(btsnoop: Array($0)) }
        for line in errors.split(separator: "\n").reversed() {
            if let link = DeviceLink(reportLine: String(line), capture: capture) { return link }
        }
        return nil
    }

    /// Runs the child to completion; returns its exit status and the last line it wrote to standard error. The
    /// flash bounds its own waits; should its standard error stay quiet for ``runLimit`` all the same, the child is
    /// killed (exit 59, `flash-stalled`, as in a batch).
    static func launch(_ executable: URL, _ arguments: [String]) async throws(BenchError) -> (Int32, String) {
        let pipe: (read: CInt, write: CInt)
        let child: ChildProcess
        do {
            pipe = try ChildProcess.makePipe()
        } catch {
            throw BenchError(.flashStart, "cannot run \(executable.path): \(error)", cause: error)
        }
        do {
            defer { _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.write) } }
            child = try ChildProcess.spawn(
                executable.path, arguments: arguments, standardInput: .null, standardOutput: .null,
                standardError: .descriptor(pipe.write))
        } catch {
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.read) }
            throw BenchError(.flashStart, "cannot run \(executable.path): \(error)", cause: error)
        }
        // The child's standard error until it closes it (at its exit).
        var output: [UInt8] = []
        var quiet = false
        if let reader = try? PipeReader(fd: pipe.read) {
            do throws(Errno) {
                output = try await reader.readToEnd(idle: runLimit)
            } catch {
                quiet = error == .timedOut
            }
            reader.close()
        }
        if quiet { child.signal(SIGKILL) }
        let exit = await child.end(grace: ProcessFlasher.exitGrace)
        let text = String(decoding: output, as: UTF8.self)
        let last = text.split(separator: "\n").last.map(String.init) ?? ""
        return (exit?.code ?? BatchExit.flashStalled, last)
    }
}
