import ArgumentParser
import DFUPackage
import DFUSimulator
import Foundation
import SecureDFU
import Testing

@testable import BledfuCLI

/// Multi-part packages through `bledfu flash` against `bledfu simulate`: the reset and reconnect (and the second
/// buttonless jump) between the parts, a system part refused as already present skipped with a message, `--scope`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct FlashPartsTests {
    /// A SoftDevice + bootloader + application package made with `bledfu package create` (version 2 of each).
    static func systemAndApplicationPackage(in directory: URL) async throws -> (path: String, package: FirmwarePackage) {
        func bytes(_ count: Int, _ seed: UInt32) -> Data {
            var state = seed
            return Data((0..<count).map { _ -> UInt8 in
                state = state &* 1_664_525 &+ 1_013_904_223
                return UInt8(truncatingIfNeeded: state >> 24)
            })
        }
        let files = [("sd.bin", 12_288, 1), ("bl.bin", 8_192, 2), ("app.bin", 16_000, 3)].map { name, size, seed in
            (directory.appendingPathComponent(name), bytes(size, UInt32(seed)))
        }
        for (url, data) in files { try data.write(to: url) }
        let output = directory.appendingPathComponent("sd-bl-app.zip").path
        let create = try PackageCreate.parse([
            "--softdevice", files[0].0.path, "--bootloader", files[1].0.path, "--bootloader-version", "2",
            "--application", files[2].0.path, "--application-version", "2", "--hw-version", "52", "--sd-req", "0xB7",
            "--sd-id", "0xB7", "--key-file", FlashFixture.privateKey.path, output,
        ])
        try await create.run()
        return (output, try FirmwarePackage(contentsOf: URL(fileURLWithPath: output)))
    }

    static func flash(_ package: String, _ simulator: FlashSimulator, _ directory: URL, _ extra: [String] = [])
        async throws -> CLIRunner.Result
    {
        try await CLIRunner.run(
            [
                "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device, "--json",
                "--state-dir", directory.appendingPathComponent("state").path, "--reboot-delay", "0.1",
            ] + extra, timeout: 90)
    }

    static func sha(_ bytes: [UInt8]) -> String { DFUSimulatorDigest.sha256Hex(bytes) }

    /// All parts with the reset between them; then the same package again: the system part is refused as already
    /// present and skipped with a message, the application is sent; then `--scope application` sends only it.
    @Test func systemThenApplicationWithSkipAndScope() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (path, package) = try await Self.systemAndApplicationPackage(in: directory)
        let system = try #require(package.part(.softdeviceBootloader))
        let application = try #require(package.part(.application))
        let simulator = try await FlashSimulator(directory: directory, speedup: 1000)
        defer { simulator.stop() }

        let first = try await Self.flash(path, simulator, directory)
        #expect(first.status == 0, "stderr: \(first.stderr)\n\(first.stdout)\nsimulator: \(simulator.log())")
        let events = CLIRunner.events(first)
        let uploads = events.filter { $0["state"] as? String == "uploading" }.compactMap { $0["name"] as? String }
        #expect(uploads == ["softdevice_bootloader", "application"], "\(first.stdout)")
        // After a SoftDevice update the bootloader stays in DFU mode for the application
        // (ACTIVATION_SUCCESS_EXPECT_ADDITIONAL_UPDATE): no second jump.
        #expect(events.filter { $0["state"] as? String == "application-mode" }.count == 1, "\(first.stdout)")
        let status = await simulator.waitForApplication(sha256: Self.sha(application.image))
        let expected = Campaign.expectedImages(system)
        #expect(FlashCampaignSupport.slot(status, "softdevice")?["sha256"] as? String == expected[0].sha256)
        #expect(FlashCampaignSupport.slot(status, "bootloader")?["sha256"] as? String == expected[1].sha256)
        #expect(FlashCampaignSupport.slot(status, "bootloader")?["version"] as? Int == 2)
        #expect(FlashCampaignSupport.applicationSHA(status) == Self.sha(application.image))

        let again = try await Self.flash(path, simulator, directory)
        #expect(again.status == 0, "stderr: \(again.stderr)\n\(again.stdout)\nsimulator: \(simulator.log())")
        let skipped = CLIRunner.events(again).filter { $0["event"] as? String == "message" }
            .compactMap { $0["message"] as? String }
        #expect(skipped.contains { $0.contains("softdevice_bootloader") && $0.contains("skipping") }, "\(again.stdout)")
        let result = CLIRunner.events(again).last { $0["event"] as? String == "result" }
        #expect(result?["partsSkipped"] as? Int == 1)
        #expect(FlashCampaignSupport.applicationSHA(await simulator.waitForApplication(sha256: Self.sha(application.image)))
            == Self.sha(application.image))

        let scoped = try await Self.flash(path, simulator, directory, ["--scope", "application"])
        #expect(scoped.status == 0, "stderr: \(scoped.stderr)\n\(scoped.stdout)\nsimulator: \(simulator.log())")
        let scopedUploads = CLIRunner.events(scoped).filter { $0["state"] as? String == "uploading" }
        #expect(scopedUploads.compactMap { $0["name"] as? String } == ["application"])
        #expect(scopedUploads.first?["parts"] as? Int == 1)
    }

    /// `--scope system` sends the SoftDevice + bootloader only: the application stays as it was.
    @Test func scopeSystemLeavesTheApplication() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (path, package) = try await Self.systemAndApplicationPackage(in: directory)
        let system = try #require(package.part(.softdeviceBootloader))
        let simulator = try await FlashSimulator(directory: directory, speedup: 1000)
        defer { simulator.stop() }
        let before = FlashCampaignSupport.applicationSHA(simulator.status())

        let result = try await Self.flash(path, simulator, directory, ["--scope", "system"])
        #expect(result.status == 0, "stderr: \(result.stderr)\n\(result.stdout)\nsimulator: \(simulator.log())")
        let uploads = CLIRunner.events(result).filter { $0["state"] as? String == "uploading" }
        #expect(uploads.compactMap { $0["name"] as? String } == ["softdevice_bootloader"])
        var status: [String: Any]?
        for _ in 0..<300 {
            status = simulator.status()
            if status?["mode"] as? String == "app" { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(FlashCampaignSupport.slot(status, "bootloader")?["sha256"] as? String == Campaign.expectedImages(system)[1].sha256)
        #expect(FlashCampaignSupport.applicationSHA(status) == before)
    }

    /// The sample SoftDevice + bootloader package on the bracelet, through the CLI.
    @Test func sampleSystemPackage() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/bracelet-sd-bl-v2.zip").path
        let package = try FirmwarePackage(contentsOf: URL(fileURLWithPath: path))
        let system = try #require(package.parts.first)
        let simulator = try await FlashSimulator(directory: directory, speedup: 1000)
        defer { simulator.stop() }
        let result = try await Self.flash(path, simulator, directory, ["--key", FlashFixture.publicKey.path])
        #expect(result.status == 0, "stderr: \(result.stderr)\n\(result.stdout)\nsimulator: \(simulator.log())")
        let expected = Campaign.expectedImages(system)
        var status: [String: Any]?
        for _ in 0..<300 {
            status = simulator.status()
            if FlashCampaignSupport.slot(status, "bootloader")?["sha256"] as? String == expected[1].sha256 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(FlashCampaignSupport.slot(status, "softdevice")?["sha256"] as? String == expected[0].sha256)
        #expect(FlashCampaignSupport.slot(status, "bootloader")?["sha256"] as? String == expected[1].sha256)
    }
}
