import Foundation
import Testing

/// `bledfu package inspect|verify|create|keys` run as a child process against the committed samples.
@Suite(.timeLimit(.minutes(5))) struct PackageCLITests {
    static let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/bracelet-app-v2.zip").path
    static let testPublicKey = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/keys/test-signing-key-DO-NOT-USE.pub.pem").path
    /// SHA-256 of `bracelet-app-v2.bin`, as listed by `tools/make-samples` (deterministic images).
    static let sampleSHA256 = "6131cba6580ccabd03a97d035ba3043e220d759b03d659ffe5b61fe261938865"

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-pkgcli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func inspectText() async throws {
        let result = try await CLIRunner.run(["package", "inspect", Self.sample])
        #expect(result.status == 0, "\(result.stderr)")
        let text = result.stdout
        #expect(text.contains("Secure DFU, 1 image(s)"))
        #expect(text.contains("[1] application: bracelet-app-v2.bin (29284 bytes), bracelet-app-v2.dat (141 bytes)"))
        #expect(text.contains("type APPLICATION, fw_version 2 (0x00000002), hw_version 52"))
        #expect(text.contains("sd_req 0x00B7 (S132 v6.1.1 (nrf52))"))
        #expect(text.contains("SHA-256 \(Self.sampleSHA256)"))
        #expect(text.contains("hash: SHA-256 matches"))
    }

    @Test func inspectJSON() async throws {
        let result = try await CLIRunner.run(["package", "inspect", "--json", Self.sample])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        #expect(object?["format"] as? String == "secure")
        #expect(object?["valid"] as? Bool == true)
        let parts = object?["parts"] as? [[String: Any]] ?? []
        #expect(parts.count == 1)
        let part = parts.first ?? [:]
        #expect(part["kind"] as? String == "application")
        #expect(part["imageSize"] as? Int == 29284)
        #expect(part["sha256"] as? String == Self.sampleSHA256)
        let command = part["initCommand"] as? [String: Any] ?? [:]
        #expect(command["fwVersion"] as? Int == 2)
        #expect(command["hwVersion"] as? Int == 52)
        #expect(command["sdReq"] as? [Int] == [0xB7])
        #expect(command["sdReqNames"] as? [String] == ["0x00B7 (S132 v6.1.1 (nrf52))"])
        #expect(command["type"] as? String == "APPLICATION")
        #expect(command["signed"] as? Bool == true)
    }

    @Test func verifyWithTestKeySucceeds() async throws {
        let result = try await CLIRunner.run(["package", "verify", "--key", Self.testPublicKey, Self.sample])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.contains("application: hash SHA-256 matches, signature valid with key 1"))
        #expect(result.stdout.contains("OK: \(Self.sample)"))
        #expect(result.stderr.isEmpty)
    }

    @Test func verifyWithAnotherKeyFails() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let privateKey = directory.appendingPathComponent("other.pem").path
        let publicKey = directory.appendingPathComponent("other.pub.pem").path
        let generate = try await CLIRunner.run(["package", "keys", "generate", privateKey, "--public", publicKey])
        #expect(generate.status == 0, "\(generate.stderr)")
        #expect(FileManager.default.fileExists(atPath: publicKey))

        let result = try await CLIRunner.run(["package", "verify", "--key", publicKey, Self.sample])
        #expect(result.status == 38)
        #expect((30...39).contains(result.status))
        #expect(result.errorLines.count == 1)
        let line = result.errorLines.first ?? ""
        #expect(line.contains("application"))
        #expect(line.contains("signature"))
        #expect(!result.stdout.contains("OK:"))
    }

    @Test func keysGenerateRefusesToOverwrite() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let privateKey = directory.appendingPathComponent("key.pem").path
        #expect(try await CLIRunner.run(["package", "keys", "generate", privateKey]).status == 0)
        let before = FileManager.default.contents(atPath: privateKey)
        let again = try await CLIRunner.run(["package", "keys", "generate", privateKey])
        #expect(again.status == 39)
        #expect(FileManager.default.contents(atPath: privateKey) == before)
    }

    @Test func createThenInspect() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let privateKey = directory.appendingPathComponent("sign.pem").path
        let publicKey = directory.appendingPathComponent("sign.pub.pem").path
        #expect(try await CLIRunner.run(["package", "keys", "generate", privateKey, "--public", publicKey]).status == 0)
        let image = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let imagePath = directory.appendingPathComponent("app.bin")
        try Data(image).write(to: imagePath)
        let output = directory.appendingPathComponent("out.zip").path

        let create = try await CLIRunner.run([
            "package", "create", "--application", imagePath.path, "--application-version", "7", "--hw-version", "52",
            "--sd-req", "0xB7,0x101", "--key-file", privateKey, output,
        ])
        #expect(create.status == 0, "\(create.stderr)")
        #expect(FileManager.default.fileExists(atPath: output))

        let inspect = try await CLIRunner.run(["package", "inspect", "--json", "--key", publicKey, output])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any]
        #expect(object?["valid"] as? Bool == true)
        let part = (object?["parts"] as? [[String: Any]])?.first ?? [:]
        #expect(part["imageSize"] as? Int == 5000)
        #expect(part["signatureStatus"] as? String == "valid with key 1")
        let command = part["initCommand"] as? [String: Any] ?? [:]
        #expect(command["fwVersion"] as? Int == 7)
        #expect(command["hwVersion"] as? Int == 52)
        #expect(command["sdReq"] as? [Int] == [0xB7, 0x101])
        #expect(command["appSize"] as? Int == 5000)

        let verify = try await CLIRunner.run(["package", "verify", "--key", publicKey, output])
        #expect(verify.status == 0, "\(verify.stderr)")
        // The sample's test key did not sign this package.
        #expect(try await CLIRunner.run(["package", "verify", "--key", Self.testPublicKey, output]).status == 38)
        // `inspect` lists the part, then ends with the failed check's code and line (stdout keeps only the listing).
        let wrongKey = try await CLIRunner.run(["package", "inspect", "--key", Self.testPublicKey, output])
        #expect(wrongKey.status == 38, "\(wrongKey.stderr)")
        #expect(wrongKey.stdout.contains("(5000 bytes)") && !wrongKey.stdout.contains("error:"))
        #expect(wrongKey.errorLines.count == 1)
        let wrongKeyJSON = try await CLIRunner.run(["package", "inspect", "--json", "--key", Self.testPublicKey, output])
        #expect(wrongKeyJSON.status == 38)
        #expect((try JSONSerialization.jsonObject(with: Data(wrongKeyJSON.stdout.utf8)) as? [String: Any])?["valid"] as? Bool == false)
    }

    @Test func createLegacyThenInspectAndVerify() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let imagePath = directory.appendingPathComponent("app.bin")
        try Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: imagePath)
        let output = directory.appendingPathComponent("legacy.zip").path
        // nrfutil 0.5: nrfutil dfu genpkg --application app.bin --dev-type 0x0052 --sd-req 0x0064 --dfu-ver 0.5 legacy.zip
        let create = try await CLIRunner.run([
            "package", "create", "--application", imagePath.path, "--dev-type", "0x0052", "--dev-revision", "52840",
            "--sd-req", "0x0064", "--dfu-ver", "0.5", output,
        ])
        #expect(create.status == 0, "\(create.stderr)")
        let inspect = try await CLIRunner.run(["package", "inspect", "--json", output])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any]
        #expect(object?["format"] as? String == "legacy")
        let part = (object?["parts"] as? [[String: Any]])?.first ?? [:]
        #expect(part["hashStatus"] as? String == "CRC-16 matches")
        let legacy = part["legacyInit"] as? [String: Any] ?? [:]
        #expect(legacy["deviceType"] as? Int == 0x52 && legacy["deviceRevision"] as? Int == 52840)
        #expect(legacy["applicationVersion"] as? Int == 0xFFFF_FFFF && legacy["sdReq"] as? [Int] == [0x64])
        #expect(legacy["layout"] as? String == "dfu_version 0.5")
        let verify = try await CLIRunner.run(["package", "verify", output])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.lines.contains("application: hash CRC-16 matches, signature unsigned"))
        // Secure-only options are refused with --dfu-ver (usage error).
        let mixed = try await CLIRunner.run(["package", "create", "--application", imagePath.path, "--dfu-ver", "0.5", "--hw-version", "52", output])
        #expect(mixed.status == 64, "\(mixed.stderr)")
        #expect(mixed.stderr.contains("--hw-version applies to Secure DFU packages only"))
    }

    @Test func verifyChecksBootValidationSignatures() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let privateKey = directory.appendingPathComponent("sign.pem").path
        let publicKey = directory.appendingPathComponent("sign.pub.pem").path
        #expect(try await CLIRunner.run(["package", "keys", "generate", privateKey, "--public", publicKey]).status == 0)
        let imagePath = directory.appendingPathComponent("app.bin")
        try Data((0..<2000).map { UInt8(truncatingIfNeeded: $0 &* 13) }).write(to: imagePath)
        let output = directory.appendingPathComponent("ecdsa.zip").path
        let create = try await CLIRunner.run([
            "package", "create", "--application", imagePath.path, "--application-version", "1", "--hw-version", "52",
            "--sd-req", "0x101", "--app-boot-validation", "VALIDATE_ECDSA_P256_SHA256", "--key-file", privateKey, output,
        ])
        #expect(create.status == 0, "\(create.stderr)")
        let verify = try await CLIRunner.run(["package", "verify", "--key", publicKey, output])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.lines.contains(
            "application: hash SHA-256 matches, signature valid with key 1, boot validation signature valid with key 1"))
        let other = try await CLIRunner.run(["package", "verify", "--key", Self.testPublicKey, output])
        #expect(other.status == 38)
        #expect(other.errorLines.contains { $0.contains("boot_validation[0] VALIDATE_ECDSA_P256_SHA256 signature does not verify") })
    }

    @Test(arguments: [Array("PK\u{3}\u{4}garbage".utf8), Array("not a zip at all\n".utf8)])
    func malformedArchive(bytes: [UInt8]) async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("bad.zip").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        for command in ["inspect", "verify"] {
            let result = try await CLIRunner.run(["package", command, path])
            #expect(result.status == 30, "\(command): \(result.stderr)")
            #expect(result.errorLines.count == 1)
            #expect(result.errorLines.first?.contains("not a zip archive") == true)
            #expect(result.stdout.isEmpty)
        }
    }
}
