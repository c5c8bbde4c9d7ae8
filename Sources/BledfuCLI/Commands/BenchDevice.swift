import Batch
import Bench
import DFUPackage
import Foundation
import LinuxIO
import MCUbootImage
import SystemPackage

/// `bledfu bench --device ADDR --package ZIP`: each mode, `repetitions` times, as a complete `bledfu flash` run (a
/// child process of this executable, so connect, buttonless jump, reconnects and journal behave exactly as in a
/// real update). The device must accept the package again after each run (same or higher version). Throughput is
/// the package's image bytes over the run's wall time. The ceiling and the protocol bound come from the link the run
/// got, as for a virtual cell (``DeviceLink``): interval, PHY and data length from the child's "link: ..." line, the
/// ATT_MTU and the packets per connection event from its ATT capture (``DeviceCapture``; `--capture` in a
/// temporary directory). A run without a link line (an unprivileged run) has no ceiling.
struct BenchDevice {
    var address: String
    var package: String
    var adapter: String
    var modes: [String]
    var repetitions: Int

    func run(_ emit: (BenchRun) -> Void) async throws -> [BenchRun] {
        let imageBytes = try Self.imageBytes(package)
        let executable = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0]))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-bench-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var runs: [BenchRun] = []
        for repetition in 1...repetitions {
            for mode in modes {
                let capture = directory.appendingPathComponent("\(mode)-\(repetition).btsnoop").path
                let arguments = [
                    "flash", package, "--device", address, "--adapter", adapter, "--mode", mode, "--json",
                    "--capture", capture,
                ]
                let start = Date()
                let (status, errors) = try await Self.launch(executable, arguments)
                let seconds = Date().timeIntervalSince(start)
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
    static func link(errors: String, capturePath: String) -> DeviceLink? {
        let capture = FileManager.default.contents(atPath: capturePath).flatMap { try? DeviceCapture(btsnoop: Array($0)) }
        for line in errors.split(separator: "\n").reversed() {
            if let link = DeviceLink(reportLine: String(line), capture: capture) { return link }
        }
        return nil
    }

    /// Image bytes of a Secure DFU zip or an MCUboot image / NCS zip.
    static func imageBytes(_ path: String) throws -> Int {
        if let bytes = FileManager.default.contents(atPath: path).map(Array.init), MCUbootPackage.looksLikeMCUboot(bytes) {
            do {
                return try MCUbootPackage(bytes: bytes, name: path).parts.reduce(0) { $0 + $1.image.bytes.count }
            } catch {
                throw CLIError(error.message, exitCode: BledfuExit.packageInvalid)
            }
        }
        return try PackageCLI.loadForFlash(path).parts.reduce(0) { $0 + $1.image.count }
    }

    /// Runs the child to completion; returns its exit status and the last line it wrote to standard error.
    /// The longest a bench run may go without a line on standard error before it is killed.
    static let runLimit: Duration = .seconds(1800)

    static func launch(_ executable: URL, _ arguments: [String]) async throws -> (Int32, String) {
        let pipe: (read: CInt, write: CInt)
        let child: ChildProcess
        do {
            pipe = try ChildProcess.makePipe()
            defer { _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.write) } }
            child = try ChildProcess.spawn(
                executable.path, arguments: arguments, standardInput: .null, standardOutput: .null,
                standardError: .descriptor(pipe.write))
        } catch {
            throw CLIError("cannot run \(executable.path): \(error)", exitCode: BledfuExit.failure)
        }
        // The child's standard error until it closes it (at its exit). The flash bounds its own waits; should its
        // standard error stay quiet for `runLimit` all the same, the child is killed (exit 59 as in a batch).
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
