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

    @Test func verifyAcceptsTheRightKeyAndRefusesOthers() async throws {
        let ok = try await CLIRunner.run(["package", "verify", Self.sensor, "--key", Self.pub, "--slot-size", "0x76000"])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.contains("OK:"))
        let wrong = try await CLIRunner.run(["package", "verify", Self.sensor, "--key", Self.nordicPub])
        #expect(wrong.status == 38)
        #expect(wrong.errorLines == ["bledfu: error: MCUboot image was signed with another key (key hash 3c01d76aca4f7621…)"] || wrong.stderr.contains("signed with another key"))
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
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.imgtool)
            process.arguments = ["verify", "-k", Self.pub, path]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let text = String(decoding: Data((try? BlockingRead.toEnd(fd: pipe.fileHandleForReading.fileDescriptor)) ?? []), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(text)")
            #expect(text.contains("3.1.4+15"))
        }
    }
}
