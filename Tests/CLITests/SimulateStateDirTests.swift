import Foundation
import LinuxIO
import Testing

/// `bledfu simulate --state-dir`: an interrupted update (the init command and the bootloader mode in flash) and
/// then the finished one survive stopping the simulator and starting it again.
@Suite(.serialized, .timeLimit(.minutes(5))) struct SimulateStateDirTests {
    static let bracelet = "C6:05:04:03:02:01"
    static let stateFile = "C6-05-04-03-02-01.state.json"
    static let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/bracelet-app-v2.zip")

    func json(_ data: Data?) -> [String: Any]? {
        data.flatMap { (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any] }
    }

    /// The first device's state from `simulate status --json`.
    func status(_ radio: String) async throws -> [String: Any]? {
        let status = try await CLIRunner.run(["simulate", "status", "--adapter", radio, "--json"])
        let line = status.stdout.split(separator: "\n").first.map { Data($0.utf8) }
        return json(line)?["state"] as? [String: Any]
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: sample.path), "run tools/make-samples first"))
    func interruptedThenFinishedUpdateSurvivesRestarts() async throws {
        let stateDir = URL(fileURLWithPath: "/tmp")
            .appendingPathComponent("bledfu-state-\(UUID().uuidString.prefix(8))")
        let journals = stateDir.appendingPathComponent("journals")
        defer { try? FileManager.default.removeItem(at: stateDir) }
        let common = ["--device", "bracelet", "--speedup", "1000", "--state-dir", stateDir.path]

        // Run 1: the device stalls at the first Execute Data (init command executed and stored) and the simulator
        // is stopped in the middle of the upload.
        let first = try SimulatorProcess(common + ["--fault", "stall-at=execute-data"])
        defer { first.cleanUp() }
        var radio = "virtual:\(first.radio.path)"
        #expect(await first.waitUntil { first.files(".adv").count == 1 }, "no advertisement: \(first.stderr)")
        let flasher = try SpawnedProcess(
            CLIRunner.binary,
            [
                "flash", "--adapter", radio, "--device", Self.bracelet, "--reconnect-attempts", "0", "--state-dir",
                journals.path, Self.sample.path,
            ])
        defer { flasher.child.terminateBlocking() }
        let stalled = await first.waitUntil(timeout: 60) {
            ((try? await status(radio))??["counters"] as? [String: Any])?["faults_fired"] as? Int == 1
        }
        #expect(stalled, "the stall never fired: \(first.stderr)")
        #expect(await first.stop() == 0, "\(first.stderr)")
        let saved = json(FileManager.default.contents(atPath: stateDir.appendingPathComponent(Self.stateFile).path))
        #expect(saved?["mode"] as? String == "bootloader", "\(String(describing: saved))")
        let settings = saved?["settings"] as? [String: Any]
        #expect((settings?["init_command"] as? [Any])?.isEmpty == false, "\(String(describing: settings))")

        // Run 2: the device comes back in the bootloader (address + 1) with the init command stored.
        let second = try SimulatorProcess(common)
        defer { second.cleanUp() }
        radio = "virtual:\(second.radio.path)"
        #expect(await second.waitUntil { second.files(".adv").count == 1 }, "no advertisement: \(second.stderr)")
        let restored = try await status(radio)
        #expect(restored?["mode"] as? String == "bootloader", "\(String(describing: restored))")
        #expect(restored?["address"] as? String == "C6:05:04:03:02:02")
        let restoredSettings = restored?["settings"] as? [String: Any]
        #expect(restoredSettings?["init_command_valid"] as? Bool == true, "\(String(describing: restoredSettings))")
        let finished = try await CLIRunner.run(
            ["flash", "--adapter", radio, "--device", Self.bracelet, "--state-dir", journals.path, Self.sample.path],
            timeout: 120)
        #expect(finished.status == 0, "\(finished.stdout)\n\(finished.stderr)")
        #expect(await second.waitUntil { (try? await status(radio))??["mode"] as? String == "app" })
        #expect(await second.stop() == 0, "\(second.stderr)")

        // Run 3: application version 2 is still installed.
        let third = try SimulatorProcess(common)
        defer { third.cleanUp() }
        radio = "virtual:\(third.radio.path)"
        #expect(await third.waitUntil { third.files(".adv").count == 1 }, "no advertisement: \(third.stderr)")
        let read = try await CLIRunner.run(["gatt", "read", "--adapter", radio, "--device", Self.bracelet, "2A26"])
        #expect(read.stdout.hasSuffix(": 32 \"2\"\n"), "application version 2 kept: \(read.stdout) \(read.stderr)")
        #expect(await third.stop() == 0, "\(third.stderr)")
    }
}
