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
    private let process = Process()

    /// Starts the simulator and waits (bounded) until the device's advertisement file exists.
    init(directory: URL, speedup: Int = 100, device: String = "bracelet", extraArguments: [String] = []) throws {
        self.directory = directory
        radio = directory.appendingPathComponent("radio").path
        statusDirectory = directory.appendingPathComponent("status")
        try FileManager.default.createDirectory(atPath: radio, withIntermediateDirectories: true)
        process.executableURL = CLIRunner.binary
        process.arguments =
            [
                "simulate", "--adapter", "virtual:\(radio)", "--device", device, "--speedup", "\(speedup)",
                "--status-dir", statusDirectory.path, "--public-key", FlashFixture.publicKey.path,
            ] + extraArguments
        process.currentDirectoryURL = CLIRunner.repositoryRoot
        FileManager.default.createFile(atPath: directory.appendingPathComponent("simulate.log").path, contents: nil)
        let logHandle = try FileHandle(forWritingTo: directory.appendingPathComponent("simulate.log"))
        process.standardOutput = logHandle
        process.standardError = logHandle
        try process.run()
        // Bounded wait for the advertisement file (the simulator is ready when it exists).
        for _ in 0..<1000 {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: radio)) ?? []
            if names.contains(where: { $0.hasSuffix(".adv") }) { return }
            if !process.isRunning { break }
            usleep(10_000)
        }
        stop()
        throw FlashFixture.Failure("the simulator did not advertise: \(log())")
    }

    func log() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("simulate.log"), encoding: .utf8)) ?? ""
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

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

    /// Waits (bounded) until the status file says `mode` and the installed application hash is `sha256`.
    func waitForApplication(sha256: String, attempts: Int = 500) -> [String: Any]? {
        var last: [String: Any]?
        for _ in 0..<attempts {
            last = status()
            if let last, last["mode"] as? String == "app",
                let installed = last["installed"] as? [String: Any],
                let application = installed["application"] as? [String: Any],
                (application["sha256"] as? String)?.lowercased() == sha256
            {
                return last
            }
            usleep(10_000)
        }
        return last
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

    /// Starts `bledfu flash PACKAGE` against the simulator's radio with its journal in `state`; standard output
    /// goes nowhere, standard error to `errors` when given.
    static func startFlash(
        _ package: String, radio: String, state: URL, errors: Pipe? = nil, output: Pipe? = nil, extra: [String] = []
    ) throws -> Process {
        let flash = Process()
        flash.executableURL = CLIRunner.binary
        flash.arguments = [
            "flash", package, "--adapter", "virtual:\(radio)", "--device", device, "--state-dir", state.path,
        ] + extra
        flash.standardOutput = output ?? FileHandle.nullDevice
        flash.standardError = errors ?? FileHandle.nullDevice
        try flash.run()
        return flash
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
        let hash = try CLIRunner.runTool("/usr/bin/sha256sum", [bin.path])
        guard let sha = hash.split(separator: " ").first else { throw Failure("sha256sum printed nothing") }
        return (package, String(sha).lowercased())
    }
}

extension CLIRunner {
    /// Runs a system tool and returns its standard output.
    static func runTool(_ path: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = Data((try? BlockingRead.toEnd(fd: pipe.fileHandleForReading.fileDescriptor)) ?? [])
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// NDJSON lines of a result, decoded.
    static func events(_ result: Result) -> [[String: Any]] {
        result.lines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }
}

/// Collects what a child writes to a pipe, on a thread of its own (a blocking read never holds up the test).
final class PipeCollector: Sendable {
    private final class Box: Sendable {
        let text = Mutex("")
    }

    private let box = Box()

    init(_ pipe: Pipe) {
        let reader = pipe.fileHandleForReading
        Thread { [box] in
            while true {
                let chunk = Data((try? BlockingRead.chunk(fd: reader.fileDescriptor)) ?? [])
                if chunk.isEmpty { return }
                box.text.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
        }.start()
    }

    var collected: String { box.text.withLock { $0 } }

    /// Waits (bounded, `seconds`) until the output contains `needle`; returns whether it did.
    func wait(for needle: String, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if collected.contains(needle) { return true }
            usleep(5_000)
        }
        return collected.contains(needle)
    }
}
