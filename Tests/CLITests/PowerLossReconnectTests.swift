import Foundation
import Testing

@testable import BledfuCLI

/// Issue 18 point 1, the power-loss case: a dual-bank nRF5 device that loses power during an update boots its old
/// application at its original address (`nrf_bootloader.c dfu_enter_check`: the application is valid, GPREGRET is
/// clear), as the simulator does. bledfu's reconnect looks at the application's address too, jumps again and
/// finishes the update (before, it looked only for the bootloader and ended with exit 43).
@Suite(.serialized, .timeLimit(.minutes(10))) struct PowerLossReconnectTests {
    @Test func aDualBankDeviceThatLostPowerIsFoundInItsApplication() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 24_000)
        let simulator = try await FlashSimulator(
            directory: directory, speedup: 1000, extraArguments: ["--fault", "power-loss-after-bytes=10000"])
        defer { simulator.stop() }
        let result = try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device, "--json",
                "--state-dir", directory.appendingPathComponent("state").path, "--reconnect-attempts", "1",
                "--timeout", "3",
            ], timeout: 120)
        // The power loss happened and the device came back in its application (the simulator's side holds).
        let status = FlashCampaignSupport.status(simulator, address: FlashFixture.device)
        #expect((status?["faults"] as? [[String: Any]])?.first?["kind"] as? String == "power-loss")
        #expect(status?["mode"] as? String == "app")
        #expect(result.status == 0, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
        #expect(FlashCampaignSupport.applicationSHA(await simulator.waitForApplication(sha256: sha, attempts: 50)) == sha)
    }
}
