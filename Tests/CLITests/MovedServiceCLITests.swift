import Batch
import Foundation
import Testing

@testable import BledfuCLI

/// `bledfu flash --service-uuid` and `--setting`: a `bledfu simulate` bracelet whose profile moves the Secure DFU
/// service and characteristics (`dfu_uuids`) is not found without them (exit 45, nothing sent) and updated with them.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MovedServiceCLITests {
    static let uuids = [
        "service": "12340000-5678-9ABC-DEF0-123456789ABC", "control_point": "12340001-5678-9ABC-DEF0-123456789ABC",
        "packet": "12340002-5678-9ABC-DEF0-123456789ABC", "buttonless": "12340003-5678-9ABC-DEF0-123456789ABC",
    ]

    /// Firmware/bracelet.json with `dfu_uuids`, written into `directory`.
    static func movedProfile(in directory: URL) throws -> String {
        let bracelet = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/bracelet.json")
        var profile = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: bracelet)) as? [String: Any])
        profile["dfu_uuids"] = uuids
        let url = directory.appendingPathComponent("moved-bracelet.json")
        try JSONSerialization.data(withJSONObject: profile).write(to: url)
        return url.path
    }

    @Test func theFlagsFindAMovedService() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 12_000)
        let simulator = try await FlashSimulator(directory: directory, device: try Self.movedProfile(in: directory))
        defer { simulator.stop() }
        let common = [
            "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
            "--key", FlashFixture.publicKey.path, "--state-dir", directory.appendingPathComponent("state").path,
        ]

        let plain = try await CLIRunner.run(common, timeout: 120)
        #expect(plain.status == FlashExit.noDFUService, "stderr: \(plain.stderr)")
        #expect(plain.stderr.split(separator: "\n").filter { $0.hasPrefix("bledfu: error: ") }.count == 1, "\(plain.stderr)")

        let moved = try await CLIRunner.run(
            common + [
                "--service-uuid", Self.uuids["service"] ?? "", "--setting", "secure.control-point=\(Self.uuids["control_point"] ?? "")",
                "--setting", "secure.packet=\(Self.uuids["packet"] ?? "")", "--setting", "secure.buttonless=\(Self.uuids["buttonless"] ?? "")",
            ], timeout: 120)
        #expect(moved.status == 0, "stderr: \(moved.stderr)\nsimulator: \(simulator.log())")
        let device = await simulator.waitForApplication(sha256: sha)
        let installed = (device?["installed"] as? [String: Any])?["application"] as? [String: Any]
        #expect((installed?["sha256"] as? String)?.lowercased() == sha)

        let bad = try await CLIRunner.run(common + ["--setting", "secure.service=FE5G"], timeout: 60)
        #expect(bad.status == BledfuExit.usage, "stderr: \(bad.stderr)")
        #expect(bad.stderr.contains("secure.service=FE5G is not a UUID"), "\(bad.stderr)")
    }
}
