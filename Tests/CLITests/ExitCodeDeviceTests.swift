import Foundation
import Testing

@testable import BledfuCLI

/// The exit codes a virtual device runs the binary into (rows of ``ExitCodeTableTests``): each run ends in its
/// code with one `bledfu: error:` line naming the cause.
@Suite(.timeLimit(.minutes(5))) struct ExitCodeDeviceTests {
    static func expectOneErrorLine(_ result: CLIRunner.Result, containing text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.errorLines.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.hasPrefix("bledfu: error: "), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "'\(text)' not in \(result.stderr)", sourceLocation: sourceLocation)
    }

    /// An attribute the device does not have: the ATT error ends in 20.
    @Test func attErrorsEndIn20() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let result = try await CLIRunner.run([
            "gatt", "read", "0x0FFF", "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
        ])
        #expect(result.status == 20, "\(result.stderr)")
        Self.expectOneErrorLine(result, containing: "Invalid Handle (0x01) to Read Request")
    }

    /// The bootloader refuses the init packet (Create Command answered 0x04, insufficient resources): 40. A failure
    /// that sent nothing prints no empty summary either: the error line says it all.
    @Test func aRefusalEndsIn40() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory, extraArguments: ["--fault", "reject-at=create-command:04"])
        defer { simulator.stop() }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 4096)
        let result = try await CLIRunner.run([
            "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
            "--state-dir", directory.appendingPathComponent("state").path, "--key", FlashFixture.publicKey.path,
        ], timeout: 120)
        #expect(result.status == 40, "\(result.stderr)")
        Self.expectOneErrorLine(result, containing: "Create")
        #expect(!result.stdout.contains("Stopped after") && !result.stdout.contains("0 bytes"), "\(result.stdout)")
        #expect(!result.stdout.contains("Done:"))
    }

    /// A device with no DFU service (tools/example-virtual-device.py): 45.
    @Test func aDeviceWithoutDFUEndsIn45() async throws {
        let device = try await CLIPythonDeviceTests.Device()
        let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/bracelet-app-v2.zip").path
        let result = try await CLIRunner.run([
            "flash", sample, "--adapter", device.adapter, "--device", CLIPythonDeviceTests.address,
            "--state-dir", device.radio.appendingPathComponent("state").path,
        ], timeout: 120)
        #expect(result.status == 45, "\(result.stderr)")
        #expect(result.errorLines.count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("bledfu: error: "), "\(result.stderr)")
    }

    /// A subscription whose device goes away: `gatt subscribe` ends in 16 (the device disconnected).
    @Test func aDeviceThatGoesAwayEndsIn16() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let output = directory.appendingPathComponent("subscribe.out")
        let errors = directory.appendingPathComponent("subscribe.err")
        // The buttonless DFU characteristic indicates (the bracelet's application).
        let subscribe = try SpawnedProcess(
            CLIRunner.binary,
            [
                "gatt", "subscribe", "8EC90003-F315-4F60-9FB8-838830DAEA50", "--adapter", "virtual:\(simulator.radio)",
                "--device", FlashFixture.device,
            ], stdout: output, stderr: errors)
        defer { if subscribe.isRunning { subscribe.terminate() } }
        // Bounded wait for "waiting" (the subscription is in place), then take the device away.
        var waiting = false
        for _ in 0..<3000 where !waiting {
            waiting = ((try? String(contentsOf: output, encoding: .utf8)) ?? "").contains("waiting")
            if !waiting { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(waiting, "subscribe never said it waits: \((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
        simulator.stop()
        for _ in 0..<3000 where subscribe.isRunning { try await Task.sleep(for: .milliseconds(10)) }
        await subscribe.waitForExit()
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        let result = CLIRunner.Result(status: subscribe.terminationStatus, stdout: "", stderr: stderr)
        #expect(result.status == 16, "\(stderr)")
        Self.expectOneErrorLine(result, containing: "disconnected")
    }
}
