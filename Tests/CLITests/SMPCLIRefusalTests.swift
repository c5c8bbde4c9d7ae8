import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

/// What an SMP device refuses or loses, through the command line against `bledfu simulate` on a virtual radio: an
/// image not newer than the running one with `flash --upgrade` (exit 40), in SMP v2 and v1; a test image that crashes
/// and is reverted by MCUboot (exit 47); requests lost on the way, which bring the adaptive window down to one.
@Suite(.timeLimit(.minutes(10))) struct SMPCLIRefusalTests {
    /// The smp-sensor profile with `edit` applied, written to a profile file for `simulate --device PATH`.
    static func profile(_ edit: (inout SMPDeviceProfile) -> Void) throws -> URL {
        let url = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/smp-sensor.json")
        var profile = try JSONDecoder().decode(SMPDeviceProfile.self, from: Data(contentsOf: url))
        edit(&profile)
        let directory = try FlashFixture.temporaryDirectory()
        let path = directory.appendingPathComponent("smp-sensor-edited.json")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try encoder.encode(profile).write(to: path)
        return path
    }

    static func start(_ profile: URL, _ arguments: [String] = ["--speedup", "50"]) async throws -> SimulatorProcess {
        let simulator = try SimulatorProcess(["--device", profile.path] + arguments)
        guard await simulator.waitUntil(timeout: 60, { !simulator.files(".adv").isEmpty }) else {
            simulator.cleanUp()
            throw FlashFixture.Failure("the SMP device does not advertise: \(simulator.stderr)")
        }
        return simulator
    }

    func run(_ simulator: SimulatorProcess, _ arguments: [String], timeout: TimeInterval = 120) async throws -> CLIRunner.Result {
        try await CLIRunner.run(arguments + ["--adapter", "virtual:\(simulator.radio.path)"], timeout: timeout)
    }

    /// `flash --upgrade` of the 2.0.0 sample onto a device running 3.1.0: the first chunk carries `upgrade`, the
    /// device refuses it before erasing (v2: rc 27 in the `err` form; v1: rc 6), one line, exit 40; the slots are
    /// untouched. The same flash without `--upgrade` goes on (the device took the image: the flag made the refusal).
    @Test(arguments: [(true, "IMG_MGMT_ERR_CURRENT_VERSION_IS_NEWER (27)"), (false, "MGMT_ERR_EBADSTATE (6)")])
    func upgradeRefusesAnImageNotNewer(smpV2: Bool, says: String) async throws {
        let path = try Self.profile { profile in
            profile.images = [SMPInstalledImage(version: "3.1.0", size: 32 * 1024)]
            profile.smp.smpV2 = smpV2
        }
        defer { try? FileManager.default.removeItem(at: path.deletingLastPathComponent()) }
        let simulator = try await Self.start(path)
        defer { simulator.cleanUp() }
        let state = simulator.radio.appendingPathComponent("state").path
        let refused = try await run(simulator, ["flash", SMPCLITests.sample, "--device", SMPCLITests.device, "--upgrade", "--state-dir", state])
        #expect(refused.status == 40, "\(refused.stderr)")
        #expect(refused.errorLines.count == 1, "\(refused.stderr)")
        #expect(refused.errorLines.first?.contains(says) == true, "\(refused.stderr)")
        #expect(refused.errorLines.first?.contains("sent with `upgrade`") == true, "\(refused.stderr)")
        await simulator.waitUntil(timeout: 30) { SMPCLITests.status(simulator)?.connected == false }
        let after = try #require(SMPCLITests.status(simulator))
        #expect(after.images.count == 1 && after.images.first?.version == "3.1.0", "\(after.images)")
        #expect(after.upload == nil && after.counters.uploadBytesWritten == 0, "\(after.counters)")

        let taken = try await run(simulator, ["flash", SMPCLITests.sample, "--device", SMPCLITests.device, "--state-dir", state])
        #expect(taken.status == 0, "\(taken.stderr)")
        let hash = try SMPCLITests.sampleHash()
        await simulator.waitUntil(timeout: 60) { SMPCLITests.status(simulator)?.images.first { $0.active }?.hash == hash }
        #expect(SMPCLITests.status(simulator)?.images.first { $0.active }?.hash == hash)
    }

    /// `simulate --fault crash-new-image=1`: the image uploads, is marked for test and booted, crashes before it is
    /// confirmed, and MCUboot reverts it. `flash` (test-and-confirm) finds the old image running after the reset: one
    /// line saying so, exit 47 (reverted); the device runs its confirmed 1.0.0 again.
    @Test func aRevertedImageIsExit47() async throws {
        let simulator = try await SMPCLITests.start(["--speedup", "50", "--fault", "crash-new-image=1"])
        defer { simulator.cleanUp() }
        let state = simulator.radio.appendingPathComponent("state").path
        let flash = try await run(simulator, ["flash", SMPCLITests.sample, "--device", SMPCLITests.device, "--state-dir", state])
        #expect(flash.status == 47, "\(flash.stderr)")
        #expect(flash.errorLines.count == 1, "\(flash.stderr)")
        #expect(flash.errorLines.first?.contains("revert") == true, "\(flash.stderr)")
        await simulator.waitUntil(timeout: 30) { SMPCLITests.status(simulator)?.connected == false }
        let device = try #require(SMPCLITests.status(simulator))
        let active = device.images.first { $0.active }
        #expect(active?.version == "1.0.0" && active?.confirmed == true, "\(device.images)")
        #expect(device.counters.faults.contains("crash-new-image"), "\(device.counters.faults)")
    }

    /// Requests lost on the way (`--fault drop-rate=0.01`, seeded, on a sensor whose buf_size is one write, 495
    /// bytes: a lost write is a lost request): the device answers the chunk after a lost one with the offset before
    /// the gap, the adaptive window (buf_count − 1 = 3) halves to one chunk in flight, `flash` says so once, and the
    /// image still ends confirmed.
    @Test func lostRequestsBringTheWindowDownToOne() async throws {
        let path = try Self.profile { $0.smp.bufferSize = 495 }
        defer { try? FileManager.default.removeItem(at: path.deletingLastPathComponent()) }
        let simulator = try await Self.start(path, ["--speedup", "50", "--fault", "seed=3,drop-rate=0.01"])
        defer { simulator.cleanUp() }
        let state = simulator.radio.appendingPathComponent("state").path
        let flash = try await run(
            simulator, ["flash", SMPCLITests.sample, "--device", SMPCLITests.device, "--state-dir", state], timeout: 300)
        #expect(flash.status == 0, "\(flash.stderr)")
        let said = flash.lines.filter { $0.contains("the window fell from 3 to 1 chunk in flight") }
        #expect(said.count == 1, "\(flash.stdout)")
        let hash = try SMPCLITests.sampleHash()
        await simulator.waitUntil(timeout: 60) { SMPCLITests.status(simulator)?.images.first { $0.active }?.confirmed == true }
        let device = try #require(SMPCLITests.status(simulator))
        #expect(device.images.first { $0.active }?.hash == hash)
        #expect(device.counters.faults.contains("drop"), "\(device.counters.faults)")
    }
}
