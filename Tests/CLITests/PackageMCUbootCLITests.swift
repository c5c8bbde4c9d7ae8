import Foundation
import LinuxIO
import Testing

/// `bledfu package inspect|verify|create` on MCUboot images and NCS zips, as a child process.
@Suite(.timeLimit(.minutes(10))) struct PackageMCUbootCLITests {
    static let root = CLIRunner.repositoryRoot
    static let sensor = root.appendingPathComponent("Firmware/samples/smp-sensor-app-v2.bin").path
    static let bracelet = root.appendingPathComponent("Firmware/samples/smp-bracelet-app-v2.zip").path
    static let key = root.appendingPathComponent("Firmware/keys/mcuboot-test-key-DO-NOT-USE.pem").path
    static let pub = root.appendingPathComponent("Firmware/keys/mcuboot-test-key-DO-NOT-USE.pub.pem").path
    static let nordicPub = root.appendingPathComponent("Firmware/keys/test-signing-key-DO-NOT-USE.pub.pem").path
    static let imgtool = root.appendingPathComponent(".venv-tools/bin/imgtool").path

    @Test func inspectShowsTheImagesOfAnNCSZip() async throws {
        let result = try await CLIRunner.run(["package", "inspect", Self.bracelet, "--key", Self.pub])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("nRF Connect SDK dfu_application.zip, 2 image(s)"))
        #expect(result.stdout.contains("[image 0] app.signed.bin: version 2.0.0"))
        #expect(result.stdout.contains("[image 1] net_core_app_update.signed.bin: version 2.0.0"))
        #expect(result.stdout.contains("signature: valid (ECDSA P-256)"))
        let json = try await CLIRunner.run(["package", "inspect", "--json", Self.sensor])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(object?["format"] as? String == "mcuboot")
        #expect(((object?["parts"] as? [[String: Any]])?.first?["version"] as? String) == "2.0.0")
    }

    /// A failed check still lists the image, then ends with its code: 38, the key is not the one that signed it.
    @Test func inspectListsThenExitsWithAFailedCheck() async throws {
        let result = try await CLIRunner.run(["package", "inspect", Self.sensor, "--key", Self.nordicPub])
        #expect(result.status == 38, "\(result.stderr)")
        #expect(result.stdout.contains("version 2.0.0"))
        #expect(result.errorLines.count == 1)
        let json = try await CLIRunner.run(["package", "inspect", "--json", Self.sensor, "--key", Self.nordicPub])
        #expect(json.status == 38)
        #expect((try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["format"] as? String == "mcuboot")
    }

    @Test func verifyAcceptsTheRightKeyAndRefusesOthers() async throws {
        let ok = try await CLIRunner.run(["package", "verify", Self.sensor, "--key", Self.pub, "--slot-size", "0x76000"])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.contains("OK:"))
        let wrong = try await CLIRunner.run(["package", "verify", Self.sensor, "--key", Self.nordicPub])
        #expect(wrong.status == 38)
        // The line names the image's key hash (the MCUboot test key's SHA-256, as imgtool computes it), exactly.
        #expect(wrong.errorLines == ["bledfu: error: MCUboot image was signed with another key (key hash 3c01d76aca4f7621…)"], "\(wrong.stderr)")
        let small = try await CLIRunner.run(["package", "verify", Self.sensor, "--slot-size", "0x8000"])
        #expect(small.status == 39)
        #expect(small.stderr.contains("does not fit a slot of 32768 bytes"))
    }

    @Test func tamperedAndTruncatedImagesAreRefusedInOneLine() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-mcuboot-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: Self.sensor)))
        bytes[4000] ^= 0x40
        let tampered = directory.appendingPathComponent("tampered.bin")
        try Data(bytes).write(to: tampered)
        let result = try await CLIRunner.run(["package", "verify", tampered.path, "--key", Self.pub])
        #expect(result.status == 37)
        #expect(result.errorLines.count == 1)
        #expect(result.stderr.contains("hash mismatch"))
        let truncated = directory.appendingPathComponent("truncated.bin")
        try Data(bytes.prefix(30_000)).write(to: truncated)
        let cut = try await CLIRunner.run(["package", "verify", truncated.path])
        #expect(cut.status == 39)
        #expect(cut.stderr.contains("truncated"))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: imgtool) || ProcessInfo.processInfo.environment["CI"] == "true", "imgtool is not installed (tools/python-env)"))
    func createSignsAnImageImgtoolAccepts() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-mcuboot-create-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let firmware = directory.appendingPathComponent("zephyr.bin")
        try Data((0..<12345).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: firmware)
        for output in ["app.signed.bin", "app.signed.hex"] {
            let path = directory.appendingPathComponent(output).path
            let created = try await CLIRunner.run([
                "package", "create", "--mcuboot", firmware.path, "--mcuboot-version", "3.1.4+15", "--key-file", Self.key, path,
            ])
            #expect(created.status == 0, "\(created.stderr)")
            let verify = try await CLIRunner.run(
                ["verify", "-k", Self.pub, path], timeout: 120, executable: URL(fileURLWithPath: Self.imgtool))
            let text = verify.stdout
            #expect(verify.status == 0, "\(text)")
            #expect(text.contains("3.1.4+15"))
        }
    }

    /// A `.hex` firmware input (Zephyr's `zephyr.hex`, made by intelhex's bin2hex at the slot's load address): the
    /// image `package create` signs from it, as `.bin` and as `.hex`, passes `imgtool verify`, and carries the same
    /// payload as the image made from the `.bin` (their hashes agree in `package inspect`).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: imgtool) || ProcessInfo.processInfo.environment["CI"] == "true", "imgtool is not installed (tools/python-env)"))
    func createFromAHexInputImgtoolAccepts() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-mcuboot-hexin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let firmware = directory.appendingPathComponent("zephyr.bin")
        try Data((0..<23456).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 5) }).write(to: firmware)
        let hexInput = directory.appendingPathComponent("zephyr.hex")
        let bin2hex = Self.root.appendingPathComponent(".venv-tools/bin/bin2hex.py").path
        let converted = try await CLIRunner.run(
            [bin2hex, "--offset=0x10000", firmware.path, hexInput.path], timeout: 60,
            executable: URL(fileURLWithPath: Self.root.appendingPathComponent(".venv-tools/bin/python3").path))
        #expect(converted.status == 0, "\(converted.stderr)")
        #expect(try String(contentsOf: hexInput, encoding: .utf8).hasPrefix(":02000004"), "not Intel HEX")
        var hashes: [String] = []
        for (input, output) in [(hexInput, "from-hex.signed.bin"), (hexInput, "from-hex.signed.hex"), (firmware, "from-bin.signed.bin")] {
            let path = directory.appendingPathComponent(output).path
            let created = try await CLIRunner.run([
                "package", "create", "--mcuboot", input.path, "--mcuboot-version", "1.2.3+4", "--key-file", Self.key, path,
            ])
            #expect(created.status == 0, "\(output): \(created.stderr)")
            let verified = try await CLIRunner.run(
                ["verify", "-k", Self.pub, path], timeout: 60, executable: URL(fileURLWithPath: Self.imgtool))
            #expect(verified.status == 0, "\(output): \(verified.stdout) \(verified.stderr)")
            #expect(verified.stdout.contains("Image was correctly validated") && verified.stdout.contains("1.2.3+4"), "\(verified.stdout)")
            let inspect = try await CLIRunner.run(["package", "inspect", "--json", path])
            let object = try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any]
            hashes.append(((object?["parts"] as? [[String: Any]])?.first?["hash"] as? String) ?? "")
        }
        #expect(Set(hashes).count == 1 && hashes[0].count == 64, "\(hashes)")
    }
}
