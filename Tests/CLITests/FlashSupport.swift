import ArgumentParser
import BledfuTestSupport
import Foundation
import LinuxIO
import Synchronization
import Testing

@testable import BledfuCLI

/// A `bledfu simulate` child process on a virtual radio in a temporary directory, for `bledfu flash` tests.
final class FlashSimulator {
    let directory: URL
    let radio: String
    let statusDirectory: URL
    private let process: SpawnedProcess

    /// Starts the simulator and waits (bounded, without holding a thread) until the device's advertisement file exists.
    init(directory: URL, speedup: Int = 100, device: String = "bracelet", extraArguments: [String] = []) async throws {
        self.directory = directory
        radio = directory.appendingPathComponent("radio").path
        statusDirectory = directory.appendingPathComponent("status")
        try FileManager.default.createDirectory(atPath: radio, withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        environment["BLEDFU_FIRMWARE_DIR"] = CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path
        let logFile = directory.appendingPathComponent("simulate.log")
        process = try SpawnedProcess(
            CLIRunner.binary,
            [
                "simulate", "--adapter", "virtual:\(radio)", "--device", device, "--speedup", "\(speedup)",
                "--status-dir", statusDirectory.path, "--public-key", FlashFixture.publicKey.path,
            ] + extraArguments,
            environment: environment, stdout: logFile, stderr: logFile)
        // Bounded wait for the advertisement file (the simulator is ready when it exists).
        let radio = self.radio
        let process = self.process
        var advertises = false
        await OffPool.poll(timeout: .seconds(10)) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: radio)) ?? []
            advertises = names.contains(where: { $0.hasSuffix(".adv") })
            return advertises || !process.isRunning
        }
        if advertises { return }
        stop()
        throw FlashFixture.Failure("the simulator did not advertise: \(log())")
    }

    func log() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("simulate.log"), encoding: .utf8)) ?? ""
    }

    /// SIGTERM and a bounded wait for the exit (at most 10 s): called from `defer` and `deinit`, which cannot await.
    func stop() { process.child.terminateBlocking() }

    deinit { stop() }

    /// The bracelet's status file (`DeviceState` JSON), decoded loosely.
    func status() -> [String: Any]? {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: statusDirectory.path)) ?? []
        for name in names where !name.hasPrefix(".") {
            guard let data = FileManager.default.contents(atPath: statusDirectory.appendingPathComponent(name).path),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { continue }
            return object
        }
        return nil
    }

    /// Waits (bounded: `attempts` checks 10 ms apart, without holding a thread) until the status file says `mode`
    /// and the installed application hash is `sha256`.
    func waitForApplication(sha256: String, attempts: Int = 500) async -> [String: Any]? {
        var last: [String: Any]?
        let found = await OffPool.poll(timeout: .milliseconds(10 * attempts)) {
            last = status()
            guard let last, last["mode"] as? String == "app",
                let installed = last["installed"] as? [String: Any],
                let application = installed["application"] as? [String: Any]
            else { return false }
            return (application["sha256"] as? String)?.lowercased() == sha256
        }
        return found ? last : (last ?? status())
    }
}

/// Packages built for the flash tests with `bledfu package create` and the repository's test key.
enum FlashFixture {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static let device = "C6:05:04:03:02:01"
    static var privateKey: URL { CLIRunner.repositoryRoot.appendingPathComponent("Firmware/keys/test-signing-key-DO-NOT-USE.pem") }
    static var publicKey: URL { CLIRunner.repositoryRoot.appendingPathComponent("Firmware/keys/test-signing-key-DO-NOT-USE.pub.pem") }

    /// Starts `bledfu flash PACKAGE` against the simulator's radio with its journal in `state`; standard error and
    /// output go to pipes this side reads when asked for, else nowhere.
    static func startFlash(
        _ package: String, radio: String, state: URL, captureErrors: Bool = false, captureOutput: Bool = false, extra: [String] = []
    ) throws -> FlashProcess {
        try FlashProcess(
            ["flash", package, "--adapter", "virtual:\(radio)", "--device", device, "--state-dir", state.path] + extra,
            captureErrors: captureErrors, captureOutput: captureOutput)
    }

    static func temporaryDirectory() throws -> URL {
        let url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("bledfu-flash-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A signed application package (version 2, hw 52, sd-req 0xB7) of `size` pseudo-random bytes; returns the
    /// package path and the image's SHA-256.
    static func applicationPackage(in directory: URL, size: Int) async throws -> (package: String, sha256: String) {
        let image = SyntheticPackage.image(size, seed: 0x1234_5678)
        let bin = directory.appendingPathComponent("app.bin")
        try Data(image).write(to: bin)
        let package = directory.appendingPathComponent("app-v2.zip").path
        // `bledfu package create`, run in-process (the subcommand may not be registered in this build).
        let create = try PackageCreate.parse([
            "--application", bin.path, "--application-version", "2", "--hw-version", "52", "--sd-req", "0xB7",
            "--key-file", privateKey.path, package,
        ])
        try await create.run()
        let hash = try await CLIRunner.runTool("/usr/bin/sha256sum", [bin.path])
        guard let sha = hash.split(separator: " ").first else { throw Failure("sha256sum printed nothing") }
        return (package, String(sha).lowercased())
    }
}

extension CLIRunner {
    /// NDJSON lines of a result, decoded.
    static func events(_ result: Result) -> [[String: Any]] {
        result.lines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }
}

/// A `bledfu flash` child (LinuxIO's ChildProcess) with its standard error and output on pipes when asked for.
final class FlashProcess {
    let child: ChildProcess
    /// The read ends (nil: the stream goes to /dev/null).
    let errors: CInt?
    let output: CInt?

    init(_ arguments: [String], captureErrors: Bool, captureOutput: Bool) throws {
        let errorPipe = captureErrors ? try ChildProcess.makePipe() : nil
        let outputPipe = captureOutput ? try ChildProcess.makePipe() : nil
        defer {
            if let errorPipe { try? FileIO.close(errorPipe.write) }
            if let outputPipe { try? FileIO.close(outputPipe.write) }
        }
        child = try ChildProcess.spawn(
            CLIRunner.binary.path, arguments: arguments, standardOutput: outputPipe.map { .descriptor($0.write) } ?? .null,
            standardError: errorPipe.map { .descriptor($0.write) } ?? .null, ownProcessGroup: false)
        errors = errorPipe?.read
        output = outputPipe?.read
    }

    deinit {
        if isRunning { child.signal(SIGKILL) }
        if let errors { try? FileIO.close(errors) }
        if let output { try? FileIO.close(output) }
    }

    var isRunning: Bool { child.exit == nil }
    var processIdentifier: Int32 { child.pid }
    /// The exit code (128 + signal for a killed child); -1 while it runs.
    var terminationStatus: Int32 { child.exit?.code ?? -1 }
    var killedBySignal: Bool {
        if case .signalled? = child.exit { return true }
        return false
    }

    func terminate() { child.signal(SIGTERM) }
    func interrupt() { child.signal(SIGINT) }

    /// Awaits the exit on the reactor (no thread held), at most `timeout` s, then SIGKILL.
    func waitForExit(timeout: TimeInterval = 120) async {
        await child.waitForExit(timeout: .seconds(timeout))
    }

    /// Standard error to its end (call after the exit), read on a thread of its own (a grandchild may hold the pipe).
    func errorText() async -> String {
        guard let errors else { return "" }
        return (try? await OffPool.run { String(decoding: (try? BlockingRead.toEnd(fd: errors)) ?? [], as: UTF8.self) }) ?? ""
    }
}

/// Collects what a child writes to a pipe, on a thread of its own (a blocking read never holds up the test).
final class PipeCollector: Sendable {
    private final class Box: Sendable {
        let text = Mutex("")
    }

    private let box = Box()

    /// `fd`: a pipe's read end that stays open while the collector reads it.
    init(fd: CInt) {
        Thread { [box] in
            while true {
                let chunk = Data((try? BlockingRead.chunk(fd: fd)) ?? [])
                if chunk.isEmpty { return }
                box.text.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
        }.start()
    }

    var collected: String { box.text.withLock { $0 } }

    /// Waits (bounded, `seconds`, without holding a thread) until the output contains `needle`; returns whether it did.
    func wait(for needle: String, seconds: Double) async -> Bool {
        await OffPool.poll(timeout: .seconds(seconds), every: .milliseconds(5)) { collected.contains(needle) }
    }
}
