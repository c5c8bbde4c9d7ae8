import Batch
import BLECore
import DFUCore
import BledfuKit
import Foundation
import LinuxIO
import SecureDFU
import Testing

@testable import BledfuCLI

/// `bledfu flash` as a process against `bledfu simulate`: no reconnect when asked, kill -9 then `bledfu resume`, a
/// stalling device, `--name` and `--unique-name`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct FlashResilienceTests {
    /// `--reconnect-attempts 0`: the first lost link ends the run (exit 43, no reconnect, the journal kept, the
    /// resume command printed); `bledfu resume` then finishes the update.
    @Test func reconnectAttemptsZeroNeverReconnects() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 24_000)
        let simulator = try await FlashSimulator(
            directory: directory, speedup: 1000, extraArguments: ["--fault", "disconnect-after-bytes=10000"])
        defer { simulator.stop() }
        let state = directory.appendingPathComponent("state")

        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device, "--json",
                "--state-dir", state.path, "--reconnect-attempts", "0",
            ], timeout: 60)
        #expect(result.status == FlashExit.linkLost, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
        let events = CLIRunner.events(result)
        #expect(!events.contains { $0["state"] as? String == "reconnecting" }, "reconnected: \(result.stdout)")
        let final = events.last { $0["event"] as? String == "result" }
        #expect(final?["reconnects"] as? Int == 0)
        let message = (final?["message"] as? String ?? "") + result.stderr
        #expect(message.contains("--reconnect-attempts 0"), "\(message)")
        #expect(message.contains("bledfu resume --device \(FlashFixture.device)"), "\(message)")
        #expect(!JournalFileStore.all(in: state).isEmpty)

        let resumed = try await CLIRunner.run(
            ["resume", "--adapter", "virtual:\(simulator.radio)", "--state-dir", state.path, "--json"], timeout: 60)
        #expect(resumed.status == 0, "stderr: \(resumed.stderr)")
        let installed = await simulator.waitForApplication(sha256: sha)
        #expect(FlashCampaignSupport.applicationSHA(installed) == sha)
    }

    /// kill -9 at seeded points (after a seeded number of executed objects, plus a seeded delay), then
    /// `bledfu resume`: every time the device ends with the package's image. One simulator, three cycles.
    @Test func killNineThenResumeAtSeededPoints() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 48_000)
        let simulator = try await FlashSimulator(directory: directory, speedup: 10)
        defer { simulator.stop() }
        var random = SplitMix64(seed: 0x0009_1111)
        for cycle in 0..<3 {
            let state = directory.appendingPathComponent("state-\(cycle)")
            let objects = 1 + Int(random.next() % 8)  // of 12
            let extraMicroseconds = useconds_t(random.next() % 40_000)
            let flash = try FlashFixture.startFlash(package, radio: simulator.radio, state: state)
            // The kill point is watched, and the kill sent, on a thread of its own: a task resumed by a busy pool
            // lagged behind the flash, whose upload then ended before the kill (1 in 3 stress runs).
            let child = flash.child
            let killedWhileRunning = try await OffPool.run { () -> Bool in
                OffPool.blockingPoll(seconds: 8, every: 0.002) {
                    let executed = (try? JournalFileStore.all(in: state).first?.file.journal.resume?.decode(SecureResume.self).executed.count) ?? 0
                    return executed >= objects || child.exit != nil
                }
                OffPool.blockingPause(microseconds: extraMicroseconds)
                let running = child.exit == nil
                child.signal(SIGKILL)
                return running
            }
            await flash.waitForExit()
            #expect(killedWhileRunning, "cycle \(cycle): flash ended before the kill point (\(objects) objects)")
            #expect(flash.killedBySignal)
            #expect(!JournalFileStore.all(in: state).isEmpty, "cycle \(cycle): no journal after kill -9")

            let resumed = try await CLIRunner.run(
                ["resume", "--adapter", "virtual:\(simulator.radio)", "--state-dir", state.path, "--json"], timeout: 90)
            #expect(resumed.status == 0, "cycle \(cycle), killed after \(objects) objects: \(resumed.stderr)")
            let installed = await simulator.waitForApplication(sha256: sha)
            #expect(FlashCampaignSupport.applicationSHA(installed) == sha, "cycle \(cycle)")
            #expect(JournalFileStore.all(in: state).isEmpty)
        }
    }

    /// Ctrl-C twice: the first asks for a stop at the next safe point, the second exits at once (130); the journal
    /// of the executed objects stays for `bledfu resume`. The device stalls at its second Execute Data (no answer
    /// for a minute: `--timeout 30`, asked twice), so the safe point the first Ctrl-C waits for never comes on its own
    /// and only the second one can end the flash, however late either signal lands.
    @Test func secondInterruptExitsAtOnce() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 96_000)
        let simulator = try await FlashSimulator(
            directory: directory, speedup: 1000, extraArguments: ["--fault", "stall-at=before-execute-data#2"])
        defer { simulator.stop() }
        let state = directory.appendingPathComponent("state")
        let flash = try FlashFixture.startFlash(
            package, radio: simulator.radio, state: state, captureErrors: true, captureOutput: true, extra: ["--timeout", "30"])
        defer { if flash.isRunning { flash.terminate() } }
        let messages = PipeCollector(fd: try #require(flash.output))
        for _ in 0..<3000 where JournalFileStore.all(in: state).isEmpty && flash.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        flash.interrupt()
        // The second Ctrl-C once the first was taken (two signals sent at once may arrive as one).
        #expect(await messages.wait(for: "stopping after the current object", seconds: 60), "\(messages.collected)")
        flash.interrupt()
        await flash.waitForExit()
        let stderr = await flash.errorText()
        #expect(flash.terminationStatus == 130, "stderr: \(stderr)")
        #expect(stderr.contains("bledfu: interrupted"), "\(stderr)")
        #expect(!JournalFileStore.all(in: state).isEmpty)
    }

    /// A device that stops answering mid-transfer: exit 42 with a one-line reason, in bounded time (the process
    /// would be killed and the test fail after 30 s).
    @Test func stallingDeviceEndsWithATimeout() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 24_000)
        let simulator = try await FlashSimulator(
            directory: directory, speedup: 1000, extraArguments: ["--fault", "stall-at=create-data#3"])
        defer { simulator.stop() }
        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
                "--state-dir", directory.appendingPathComponent("state").path, "--timeout", "1",
                "--reconnect-attempts", "0",
            ], timeout: 30)
        #expect(result.status == FlashExit.timeout, "stderr: \(result.stderr)")
        #expect(result.errorLines.count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("no answer") || result.stderr.contains("stopped answering"), "\(result.stderr)")
    }

    /// A device that stops answering while every timeout of the flow is longer than the watchdog (`--timeout 90`):
    /// bledfu's own watchdog ends it after `--stall-timeout 30` with exit 49, one line naming the last step, within
    /// the limit and its 5 s grace (it fired up to twice the limit late before it slept until the last event's
    /// time plus the limit).
    @Test func theWatchdogEndsAStalledFlashIn49() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 24_000)
        let simulator = try await FlashSimulator(
            directory: directory, speedup: 1000, extraArguments: ["--fault", "stall-at=execute"])
        defer { simulator.stop() }
        let started = ContinuousClock.now
        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
                "--state-dir", directory.appendingPathComponent("state").path, "--timeout", "90",
                "--stall-timeout", "30",
            ], timeout: 80)
        let took = started.duration(to: .now)
        #expect(result.status == FlashExit.stalled, "stderr: \(result.stderr)")
        #expect(result.errorLines.count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("nothing happened for 30 s (last: uploading"), "\(result.stderr)")
        #expect(took < .seconds(60), "\(took)")
    }

    /// `--name`: the device is found by its advertised name (prefix), jumps, and is updated.
    @Test func flashByName() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 12_000)
        let simulator = try await FlashSimulator(directory: directory, speedup: 1000)
        defer { simulator.stop() }
        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--name", "Brace", "--json",
                "--state-dir", directory.appendingPathComponent("state").path, "--scan-timeout", "5",
            ], timeout: 60)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let states = CLIRunner.events(result).compactMap { $0["state"] as? String }
        #expect(states.prefix(2).contains("scanning"), "\(states)")
        #expect(states.contains("application-mode"))
        #expect(FlashCampaignSupport.applicationSHA(await simulator.waitForApplication(sha256: sha)) == sha)
    }

    /// `--unique-name`: the app is asked to advertise DfuXXXXXX (the address's last three bytes) in its bootloader,
    /// and the bootloader is found by that name.
    @Test func uniqueBootloaderNameIsUsedToFindTheBootloader() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 12_000)
        let simulator = try await FlashSimulator(directory: directory, speedup: 1000)
        defer { simulator.stop() }
        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device, "--json",
                "--state-dir", directory.appendingPathComponent("state").path, "--unique-name",
            ], timeout: 60)
        #expect(result.status == 0, "stderr: \(result.stderr)\n\(result.stdout)\nsimulator: \(simulator.log())")
        let events = CLIRunner.events(result)
        #expect(!events.contains { $0["event"] as? String == "warning" }, "\(result.stdout)")
        let found = events.first { $0["state"] as? String == "found" }
        #expect(found?["name"] as? String == "Dfu030201", "\(result.stdout)")
        #expect(found?["by"] as? String == "name")
        #expect(found?["address"] as? String == "C6:05:04:03:02:02")
        #expect(FlashCampaignSupport.applicationSHA(await simulator.waitForApplication(sha256: sha)) == sha)
    }
}

enum FlashCampaignSupport {
    static func applicationSHA(_ status: [String: Any]?) -> String? {
        slot(status, "application")?["sha256"].flatMap { $0 as? String }?.lowercased()
    }

    static func slot(_ status: [String: Any]?, _ name: String) -> [String: Any]? {
        (status?["installed"] as? [String: Any])?[name] as? [String: Any]
    }

    /// A device's status file in the simulator's status directory, by identity address.
    static func status(_ simulator: FlashSimulator, address: String) -> [String: Any]? {
        let file = simulator.statusDirectory.appendingPathComponent(address.replacingOccurrences(of: ":", with: "-") + ".json")
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}
