import DFUPackage
import Foundation
import Testing

/// `bledfu flash --image app.bin --init app.dat`: a Secure DFU image and its init packet without a zip (issue 20
/// point 4), as a device vendor ships them, against a virtual bracelet.
@Suite(.serialized, .timeLimit(.minutes(5))) struct FlashImageInitTests {
    @Test func anImageAndItsInitPacketInstallWithoutAZip() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, sha) = try await FlashFixture.applicationPackage(in: directory, size: 24_000)
        // The zip's two files, loose.
        let part = try #require(try FirmwarePackage(contentsOf: URL(fileURLWithPath: package)).parts.first)
        let bin = directory.appendingPathComponent("loose.bin")
        let dat = directory.appendingPathComponent("loose.dat")
        try Data(part.image).write(to: bin)
        try Data(part.initPacketBytes).write(to: dat)
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let state = directory.appendingPathComponent("state")

        let result = try await CLIRunner.run(
            [
                "flash", "--image", bin.path, "--init", dat.path, "--adapter", "virtual:\(simulator.radio)", "--device",
                FlashFixture.device, "--json", "--key", FlashFixture.publicKey.path, "--state-dir", state.path,
            ], timeout: 120)

        #expect(result.status == 0, "stderr: \(result.stderr)\nsimulator: \(simulator.log())")
        let final = CLIRunner.events(result).last { $0["event"] as? String == "result" }
        #expect(final?["success"] as? Bool == true)
        #expect(final?["bytesSent"] as? Int == 24_000)
        let device = await simulator.waitForApplication(sha256: sha)
        let installed = (device?["installed"] as? [String: Any])?["application"] as? [String: Any]
        #expect((installed?["sha256"] as? String)?.lowercased() == sha)
    }

    /// The in-memory package is the zip's twin: same manifest key, same files; reproducible.
    @Test func theBuiltPackageReadsBackAsTheImageAndItsInitPacket() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 4_000)
        let original = try #require(try FirmwarePackage(contentsOf: URL(fileURLWithPath: package)).parts.first)
        let zip = try FirmwarePackage.archive(image: original.image, initPacket: original.initPacketBytes)
        #expect(zip == (try FirmwarePackage.archive(image: original.image, initPacket: original.initPacketBytes)))
        let rebuilt = try FirmwarePackage(bytes: zip)
        #expect(rebuilt.format == .secure && rebuilt.parts.count == 1)
        #expect(rebuilt.parts.first?.kind == .application)
        #expect(rebuilt.parts.first?.image == original.image && rebuilt.parts.first?.initPacketBytes == original.initPacketBytes)
        #expect(rebuilt.warnings.isEmpty, "\(rebuilt.warnings)")
        // A sample SD+BL package's part keeps its kind and sizes.
        let sdbl = try FirmwarePackage(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/bracelet-sd-bl-v2.zip"))
        let system = try #require(sdbl.parts.first { $0.kind == .softdeviceBootloader })
        let again = try FirmwarePackage(bytes: try FirmwarePackage.archive(image: system.image, initPacket: system.initPacketBytes))
        #expect(again.parts.first?.kind == .softdeviceBootloader)
        #expect(again.parts.first?.sizes.softdevice == system.sizes.softdevice && again.parts.first?.sizes.bootloader == system.sizes.bootloader)
    }

    /// Bad input: one line and the documented exit code.
    @Test func badImageInitArgumentsGetOneLine() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let bin = directory.appendingPathComponent("a.bin")
        let dat = directory.appendingPathComponent("a.dat")
        try Data(repeating: 0xAB, count: 64).write(to: bin)
        try Data([0x12, 0x34, 0x56]).write(to: dat)
        let device = ["--adapter", "virtual:\(directory.path)", "--device", FlashFixture.device]
        for (arguments, code, text) in [
            (["flash", "--image", bin.path] + device, Int32(64), "--image needs --init"),
            (["flash", "--init", dat.path] + device, 64, "--init needs --image"),
            (["flash", "x.zip", "--image", bin.path, "--init", dat.path] + device, 64, "not both"),
            (["flash", "--image", bin.path, "--init", dat.path] + device, 36, "init packet does not decode"),
            (["flash", "--image", directory.appendingPathComponent("none.bin").path, "--init", dat.path] + device, 39, "cannot read the image"),
        ] {
            let result = try await CLIRunner.run(arguments)
            #expect(result.status == code, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(text), "\(arguments): \(result.stderr)")
        }
    }
}
