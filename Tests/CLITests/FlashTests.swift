import Batch
import DFUCore
import BledfuKit
import Foundation
import LinuxIO
import SecureDFU
import Testing

@testable import BledfuCLI

@Suite(.serialized, .timeLimit(.minutes(5))) struct FlashTests {
    /// App mode → buttonless jump → bootloader at address + 1 → upload → the device runs the new image.
    @Test func flashFromApplicationModeInstallsTheImage() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 24_000)
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let state = directory.appendingPathComponent("state")

        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device, "--json",
                "--key", FlashFixture.publicKey.path, "--state-dir", state.path,
            ], timeout: 120)

        #expect(result.status == 0, "stderr: \(result.stderr)\nsimulator: \(simulator.log())")
        let events = CLIRunner.events(result)
        let states = events.compactMap { $0["state"] as? String }
        #expect(states.contains("application-mode"))
        #expect(states.contains("bootloader"))
        #expect(states.contains("completed"))
        let final = events.last { $0["event"] as? String == "result" }
        #expect(final?["success"] as? Bool == true)
        #expect(final?["bytesSent"] as? Int == 24_000)
        let device = await simulator.waitForApplication(sha256: sha)
        #expect(device?["mode"] as? String == "app")
        let installed = (device?["installed"] as? [String: Any])?["application"] as? [String: Any]
        #expect((installed?["sha256"] as? String)?.lowercased() == sha)
        // A finished upload leaves no journal behind.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []
        #expect(left.filter { $0.hasSuffix(".json") }.isEmpty)
    }

    /// The link drops part-way; flash reconnects to the bootloader, resumes with Select, and finishes correctly.
    @Test func flashResumesAfterADisconnect() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 24_000)
        let simulator = try await FlashSimulator(directory: directory, extraArguments: ["--fault", "disconnect-after-bytes=10000"])
        defer { simulator.stop() }

        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device, "--json",
                "--state-dir", directory.appendingPathComponent("state").path,
            ], timeout: 120)

        #expect(result.status == 0, "stderr: \(result.stderr)\nsimulator: \(simulator.log())")
        let events = CLIRunner.events(result)
        #expect(events.contains { $0["state"] as? String == "reconnecting" })
        let final = events.last { $0["event"] as? String == "result" }
        #expect((final?["reconnects"] as? Int ?? 0) >= 1)
        // Resumed, not restarted: fewer than the whole image twice went over the air.
        #expect((final?["bytesSent"] as? Int ?? 0) < 2 * 24_000)
        let device = await simulator.waitForApplication(sha256: sha)
        #expect(device?["mode"] as? String == "app")
        let installed = (device?["installed"] as? [String: Any])?["application"] as? [String: Any]
        #expect((installed?["sha256"] as? String)?.lowercased() == sha)
    }

    /// Ctrl-C stops at a safe point with exit 130 and a journal; `bledfu resume` finishes the upload.
    @Test func interruptThenResumeFinishesTheUpload() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 96_000)
        let simulator = try await FlashSimulator(directory: directory, speedup: 5)
        defer { simulator.stop() }
        let state = directory.appendingPathComponent("state")
        let flash = try FlashFixture.startFlash(package, radio: simulator.radio, state: state, captureErrors: true)
        defer { if flash.isRunning { flash.terminate() } }
        // Bounded wait for the first journal (written after the first executed object).
        var journals: [String] = []
        for _ in 0..<2000 where journals.isEmpty && flash.isRunning {
            journals = ((try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []).filter { $0.hasSuffix(".json") }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(!journals.isEmpty, "no journal appeared")
        flash.interrupt()
        await flash.waitForExit()
        let stderr = await flash.errorText()
        #expect(flash.terminationStatus == 130, "stderr: \(stderr)")
        #expect(stderr.contains("bledfu resume --device \(FlashFixture.device)"))
        #expect(!JournalFileStore.all(in: state).isEmpty)

        let resumed = try await CLIRunner.run(
            ["resume", "--adapter", "virtual:\(simulator.radio)", "--state-dir", state.path, "--json"], timeout: 120)
        #expect(resumed.status == 0, "stderr: \(resumed.stderr)")
        let device = await simulator.waitForApplication(sha256: sha)
        let installed = (device?["installed"] as? [String: Any])?["application"] as? [String: Any]
        #expect((installed?["sha256"] as? String)?.lowercased() == sha)
        #expect(JournalFileStore.all(in: state).isEmpty)
    }

    @Test func corruptPackageFailsPreflightWithThePackageExitCode() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let package = directory.appendingPathComponent("broken.zip")
        try Data("not a zip file".utf8).write(to: package)
        let result = try await CLIRunner.run([
            "flash", package.path, "--adapter", "virtual:\(directory.path)", "--device", FlashFixture.device,
        ])
        #expect((30...39).contains(result.status), "exit \(result.status): \(result.stderr)")
        #expect(result.errorLines.count == 1)
    }

    /// `--family` names a family the updater must know: another one is refused in one line (a usage error) before
    /// anything connects.
    @Test func unknownFamilyIsAUsageError() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 1000)
        let result = try await CLIRunner.run([
            "flash", package, "--adapter", "virtual:\(directory.path)", "--device", FlashFixture.device,
            "--family", "zigbee",
        ])
        #expect(result.status == BledfuExit.usage, "exit \(result.status): \(result.stderr)")
        #expect(result.errorLines == ["bledfu: error: no family 'zigbee' is registered (available: secure, legacy, smp)"])
    }

    @Test func helpDocumentsTheDFUExitCodes() async throws {
        let result = try await CLIRunner.run(["flash", "--help"])
        #expect(result.status == 0)
        for code in 40...45 { #expect(result.stdout.contains("\(code)\t"), "flash --help lacks exit code \(code)") }
        #expect(result.stdout.contains("--reconnect-attempts"))
    }

    @Test func resumeWithoutAJournalSaysSo() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try await CLIRunner.run([
            "resume", "--adapter", "virtual:\(directory.path)", "--state-dir", directory.path, "--device", FlashFixture.device,
        ])
        #expect(result.status == 1)
        #expect(result.stderr.contains("no unfinished upload for \(FlashFixture.device)"))
    }

    @Test func journalFileStoreRoundTripsAndRemoves() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = JournalFileStore(directory: directory, packagePath: "/tmp/app.zip", adapter: "hci0", addressType: "random")
        let journal = UpdateJournal(
            deviceAddress: "C6:05:04:03:02:01", packageSHA256: "ab" + String(repeating: "0", count: 62), family: .secure,
            confirmedBytes: 4096,
            resume: try ResumePayload(SecureResume(executed: [DFUExecutedObject(index: 0, offset: 4096, crc: 0x1234_5678)])))
        try await store.save(journal)
        let loaded = try await store.load(deviceAddress: "c6:05:04:03:02:01", packageSHA256: journal.packageSHA256)
        #expect(loaded == journal)
        let all = JournalFileStore.all(in: directory)
        #expect(all.count == 1)
        #expect(all.first?.file.packagePath == "/tmp/app.zip")
        #expect(all.first?.file.adapter == "hci0")
        // No temporary files are left next to the journal.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).count == 1)
        try await store.remove(deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256)
        #expect(try await store.load(deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256) == nil)
    }
}
