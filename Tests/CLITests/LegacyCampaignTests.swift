import Foundation
import Testing

/// The fault campaign's Legacy runs (Sources/FuzzFaultCampaign/LegacyProcessRun.swift, docs/reliability.md): legacy
/// run 0 of seed 1 is the SDK 11 nRF51 with a disconnect at a seeded byte offset and two kills, legacy run 2 the
/// single-bank Adafruit board with a disconnect and a kill: the campaign starts `bledfu simulate`, SIGKILLs `bledfu
/// flash`/`resume` children in the middle of the image, reruns `bledfu resume` and checks the SHA-256 of the image
/// the device installed. With a `bledfu` whose `resume` lies (exit 0 without an upload) the run is a violation.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: CampaignBinary.url.path)
    || ProcessInfo.processInfo.environment["CI"] == "true", "FuzzFaultCampaign is not built next to bledfu"), .timeLimit(.minutes(5)))
struct LegacyCampaignTests {
    /// `FuzzFaultCampaign --seed 1 --legacy-run INDEX --verbose --speedup 4` (the Legacy devices run at half the
    /// campaign's speedup: slow enough that the kills land inside the image on a loaded machine). Blocking.
    static func run(_ index: Int, bledfu: URL) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = CampaignBinary.url
        process.arguments = ["--seed", "1", "--legacy-run", "\(index)", "--verbose", "--speedup", "4", "--bledfu", bledfu.path]
        process.currentDirectoryURL = CLIRunner.repositoryRoot
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("legacy-campaign-\(UUID().uuidString).out")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = process.standardOutput
        try process.run()
        // On the thread of its own the caller gave it (`OffPool.run`).
        OffPool.blockingPoll(seconds: 240) { !process.isRunning }
        if process.isRunning { process.terminate() }
        if !OffPool.blockingPoll(seconds: 20, { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
        guard OffPool.blockingPoll(seconds: 20, { !process.isRunning }) else { return (-1, "the campaign did not exit") }
        return (process.terminationStatus, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }

    @Test(arguments: [(0, "sdk11-nrf51"), (2, "adafruit-feather52832")])
    func killsAndDisconnectsEndWithTheImageInstalled(index: Int, profile: String) async throws {
        let (status, output) = try await OffPool.run { try Self.run(index, bledfu: CLIRunner.binary) }
        #expect(status == 0, "\(output)")
        #expect(output.contains("verified: legacy run \(index): \(profile),"), "\(output)")
        #expect(output.contains("SIGKILL at "), "\(output)")
        #expect(output.contains("verified image (installed SHA-256 checked): 1"), "\(output)")
        #expect(output.contains("violations:                0"), "\(output)")
        #expect(output.contains("disconnects at seeded offsets: 1 fired of 1 planned"), "\(output)")
    }

    /// A `resume` that claims success without touching the device: the image is not installed, a violation, exit 1.
    @Test func aLyingResumeIsAViolation() async throws {
        let liar = try FaultCampaignKillTests.wrapper(resume: "exit 0")
        defer { try? FileManager.default.removeItem(at: liar.deletingLastPathComponent()) }
        let (status, output) = try await OffPool.run { try Self.run(2, bledfu: liar) }
        #expect(status == 1, "\(output)")
        #expect(output.contains("violation: legacy run 2:"), "\(output)")
        #expect(output.contains("bledfu exited 0, the device does not hold the image"), "\(output)")
    }
}
