import BLECore
import DFUCore
import DFUSimulator
import Foundation

/// Where the campaign finds `bledfu` and puts the files of its process runs (``ProcessKillRun``).
struct ProcessSetup {
    /// The `bledfu` executable (`--bledfu PATH`; by default the one next to the campaign executable).
    var bledfu: URL
    /// Each process run works in `root/run-INDEX` (removed afterwards unless `keepFiles`).
    var root: URL
    var keepFiles: Bool
    /// The virtual device's `speedup` (its link and flash times divided by it): slow enough that a kill lands in
    /// the middle of an upload, fast enough for CI.
    var speedup: Double
    /// `bledfu --timeout` in seconds (no answer from the device).
    var timeoutSeconds: Double
    /// A `bledfu` process still running after this long is killed and the run is a violation (a hang).
    var processLimitSeconds: Double

    /// `bledfu` next to this executable (`swift build` puts both into the same bin directory).
    static func defaultBledfu() -> URL {
        let executable = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0]))
            .resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("bledfu")
    }

    /// Runs `body` in a fresh `root/name` (removed afterwards unless `keepFiles`); returns the note of a set-up
    /// failure (the run is then a violation), or nil.
    func inRunDirectory(_ name: String, _ body: (URL) throws -> Void) -> String? {
        let directory = root.appendingPathComponent(name)
        defer { if !keepFiles { try? FileManager.default.removeItem(at: directory) } }
        do {
            try? FileManager.default.removeItem(at: directory)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try body(directory)
            return nil
        } catch {
            return "campaign setup failed: \(error)"
        }
    }
}

/// A child process whose output goes to files (a chatty child can never block on a full pipe).
final class ChildProcess {
    let process = Process()
    let stdoutFile: URL
    let stderrFile: URL
    let started = Date()

    init(_ executable: URL, _ arguments: [String], output base: URL) throws {
        stdoutFile = base.appendingPathExtension("out")
        stderrFile = base.appendingPathExtension("err")
        for file in [stdoutFile, stderrFile] { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: stdoutFile)
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }
    var elapsed: Double { Date().timeIntervalSince(started) }
    var stdout: String { (try? String(contentsOf: stdoutFile, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    /// SIGKILL, and wait for the exit.
    func killNow() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Waits for the exit at most `seconds`; false (still running) when the time is up.
    func wait(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { usleep(2_000) }
        if process.isRunning { return false }
        process.waitUntilExit()
        return true
    }

    /// SIGTERM, then SIGKILL when it has not exited within `seconds`.
    func stop(seconds: Double = 10) {
        guard process.isRunning else { return }
        process.terminate()
        if !wait(seconds: seconds) { killNow() }
    }

    /// The exit status, or 128 + the signal number when a signal ended it.
    var status: Int32 {
        process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }
}

/// How one `bledfu flash` or `bledfu resume` process ended.
struct UploadProcessResult: CustomStringConvertible {
    var command: String
    /// Exit status; nil when the campaign killed it (SIGKILL).
    var status: Int32?
    /// The device's Packet bytes when it was killed.
    var killedAtBytes: Int?
    /// Standard error's lines other than warnings.
    var errorLines: [String]
    /// `bytesResent` of its JSON `result` event (the engine's own count for this process), when it printed one.
    var engineResent: Int?
    var seconds: Double

    /// Exactly one `bledfu: error: …` line and nothing else (warnings aside).
    var clearError: Bool { errorLines.count == 1 && errorLines[0].hasPrefix("bledfu: error: ") && errorLines[0].count > 15 }

    var description: String {
        let how = killedAtBytes.map { "SIGKILL at \($0) B" } ?? "exit \(status.map(String.init) ?? "?")"
        return "\(command): \(how), \(String(format: "%.1f", seconds)) s"
            + (errorLines.isEmpty ? "" : ": " + errorLines.joined(separator: " / "))
    }

    init(command: String, child: ChildProcess, killedAtBytes: Int?) {
        self.command = command
        self.killedAtBytes = killedAtBytes
        status = killedAtBytes == nil ? child.status : nil
        seconds = child.elapsed
        errorLines = child.stderr.split(separator: "\n").map(String.init).filter {
            !$0.isEmpty && !$0.hasPrefix("bledfu: warning: ")
        }
        // The last `result` event of `--json` (the Codable event record bledfu writes; docs/events.md).
        let decoder = JSONDecoder()
        for line in child.stdout.split(separator: "\n").reversed() {
            guard let record = try? decoder.decode(UpdateEventRecord.self, from: Data(line.utf8)),
                case .result(let summary) = record.event
            else { continue }
            engineResent = summary.bytesResent
            break
        }
    }
}

/// What the campaign reads from a virtual device's status file: the packet bytes it received (kept, not dropped).
protocol CampaignDeviceState: Decodable {
    var packetBytesReceived: Int { get }
}

extension DeviceState: CampaignDeviceState {
    var packetBytesReceived: Int { Int(counters.bytesReceived) }
}

extension LegacyDeviceState: CampaignDeviceState {
    var packetBytesReceived: Int { Int(counters.bytesReceived) }
}

/// A `bledfu simulate` child hosting one virtual device on a virtual radio directory; the device lives in that
/// process, so it outlives every `bledfu flash` the campaign kills. Its status file (`State`: a Secure DFU
/// `DeviceState` or a `LegacyDeviceState`, rewritten on every change) tells the campaign how many bytes the device
/// received and what it installed.
final class SimulatorChild<State: CampaignDeviceState> {
    let child: ChildProcess
    let radio: URL
    let statusFile: URL

    /// Starts `bledfu simulate --device device` (a profile's name or path) with `options`, and waits (bounded)
    /// until the device advertises and publishes its state.
    init(setup: ProcessSetup, directory: URL, device: String, address: String, options: [String], name: String) throws {
        radio = directory.appendingPathComponent("radio")
        let status = directory.appendingPathComponent("status")
        try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
        statusFile = status.appendingPathComponent(address.replacingOccurrences(of: ":", with: "-") + ".json")
        let arguments =
            ["simulate", "--adapter", "virtual:\(radio.path)", "--device", device, "--status-dir", status.path] + options
        child = try ChildProcess(setup.bledfu, arguments, output: directory.appendingPathComponent(name))
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, child.isRunning {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: radio.path)) ?? []
            if names.contains(where: { $0.hasSuffix(".adv") }), state() != nil { return }
            usleep(5_000)
        }
        let log = child.stderr
        child.stop()
        throw CampaignSetupError("bledfu simulate did not start: \(log)")
    }

    /// The device's last published state (nil while the file is missing or being replaced).
    func state() -> State? {
        guard let data = FileManager.default.contents(atPath: statusFile.path) else { return nil }
        return try? JSONDecoder().decode(State.self, from: data)
    }

    /// Packet bytes the device received (kept, not dropped) since the simulator started.
    func bytesReceived() -> Int? { state()?.packetBytesReceived }

    func stop() { child.stop() }
}

struct CampaignSetupError: CodedError, Sendable {
    struct Code: RawRepresentable, Hashable, Sendable {
        var rawValue: String
        init(rawValue: String) { self.rawValue = rawValue }
        /// A child process, a socket or a file the run needs could not be set up.
        static let setup = Code(rawValue: "campaign-setup")
    }

    var code: Code { .setup }
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}
