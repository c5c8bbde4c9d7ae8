import BLECore
import Crypto
import Foundation
import Testing

@testable import DFUPackage

/// The real public packages in `<repo>/../shared/corpus/nordic-dfu-packages` (or `$BLEDFU_CORPUS`), checked against
/// the independent decode in `expected-decodes.json`. Without the corpus these tests are skipped, visibly; under
/// `CI=true` (`.ci/run`) they run and fail, so CI never passes without the real packages.
enum Corpus {
    static let root: URL = {
        if let path = ProcessInfo.processInfo.environment["BLEDFU_CORPUS"], !path.isEmpty {
            return URL(fileURLWithPath: path).standardized
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/corpus/nordic-dfu-packages").standardized
    }()

    static var isPresent: Bool { FileManager.default.fileExists(atPath: root.appendingPathComponent("expected-decodes.json").path) }

    /// Run the corpus tests: the corpus is there, or CI demands it (then a missing corpus fails the test).
    static var shouldRun: Bool { isPresent || ProcessInfo.processInfo.environment["CI"] == "true" }

    static func expected() throws -> [[String: Any]] {
        let data = try Data(contentsOf: root.appendingPathComponent("expected-decodes.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
    }

    static func packageURL(_ path: String) -> URL {
        let relative = path.hasPrefix("public/") ? String(path.dropFirst("public/".count)) : path
        return root.appendingPathComponent(relative)
    }

    static func keys() throws -> [P256.Signing.PublicKey] {
        try ["ios_dfu_testapp_key.pem", "sdk160_pcnrfutil_tests_key.pem"].map { name in
            let pem = try String(contentsOf: root.appendingPathComponent("recovered_keys/\(name)"), encoding: .utf8)
            return try PackageKeys.publicKey(pem: pem, name: name)
        }
    }
}

@Suite(.timeLimit(.minutes(3))) struct CorpusTests {
    @Test(.enabled(if: Corpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func everyRealPackageDecodesAsExpected() throws {
        let expected = try Corpus.expected()
        #expect(expected.count >= 100)
        let keys = try Corpus.keys()
        var imagesChecked = 0
        var signaturesVerified = 0
        for record in expected {
            let path = try #require(record["package"] as? String)
            let name = Corpus.packageURL(path).lastPathComponent
            let package = try FirmwarePackage(contentsOf: Corpus.packageURL(path))
            let entries = try #require(record["entries"] as? [[String: Any]])
            #expect(package.entries.map(\.name) == entries.compactMap { $0["name"] as? String }, "\(name)")
            for (entry, info) in zip(entries, package.entries) {
                #expect(String(format: "%08x", info.crc32) == entry["crc32"] as? String, "\(name) \(info.name)")
                #expect(info.isCompressed == (entry["compression"] as? String != "stored"), "\(name) \(info.name)")
            }
            let images = try #require(record["images"] as? [[String: Any]])
            #expect(package.parts.count == images.count, "\(name)")
            for image in images {
                let key = try #require(image["manifest_key"] as? String)
                let kind = try #require(PartKind(rawValue: key))
                let part = try #require(package.part(kind), "\(name) \(key)")
                try check(part, image, in: name)
                let report = PackageVerifier.verify(part, keys: keys)
                try checkVerification(report, part, image, in: name)
                if case .valid = report.signature { signaturesVerified += 1 }
                imagesChecked += 1
            }
        }
        #expect(imagesChecked > 130)
        #expect(signaturesVerified == 110)
    }

    private func check(_ part: PackagePart, _ image: [String: Any], in name: String) throws {
        let where_ = "\(name) \(part.kind)"
        #expect(part.binFile == image["bin_file"] as? String, "\(where_)")
        #expect(part.datFile == image["dat_file"] as? String, "\(where_)")
        #expect(part.image.count == image["bin_len"] as? Int, "\(where_)")
        #expect(part.initPacketBytes.hexString == image["dat_hex"] as? String, "\(where_)")
        let initPacket = try #require(image["init_packet"] as? [String: Any])
        switch initPacket["format"] as? String {
        case "secure-protobuf":
            let secure = try #require(part.secureInit, "\(where_) should be Secure")
            #expect(secure.isSigned == (initPacket["signed"] as? Bool), "\(where_)")
            #expect(secure.signature?.hexString == initPacket["signature_hex_as_stored"] as? String, "\(where_)")
            if let raw = initPacket["raw_init_command_hex"] as? String {
                #expect(secure.initCommandBytes.hexString == raw, "\(where_)")
            }
            let fields = try #require((initPacket["command"] as? [String: Any])?["init"] as? [String: Any])
            let command = secure.command
            #expect(command.fwVersion.map(Int.init) == fields["fw_version"] as? Int, "\(where_) fw_version")
            #expect(command.hwVersion.map(Int.init) == fields["hw_version"] as? Int, "\(where_) hw_version")
            #expect(command.sdReq.map(Int.init) == (fields["sd_req"] as? [Int] ?? []), "\(where_) sd_req")
            #expect(command.type?.description == fields["type"] as? String, "\(where_) type")
            #expect(command.sdSize.map(Int.init) == fields["sd_size"] as? Int, "\(where_) sd_size")
            #expect(command.blSize.map(Int.init) == fields["bl_size"] as? Int, "\(where_) bl_size")
            #expect(command.appSize.map(Int.init) == fields["app_size"] as? Int, "\(where_) app_size")
            #expect(command.isDebug == fields["is_debug"] as? Bool, "\(where_) is_debug")
            let hash = fields["hash"] as? [String: Any]
            #expect(command.hash?.bytes.hexString == hash?["hash_hex_as_stored"] as? String, "\(where_) hash")
            #expect(command.hash?.type.description == hash?["hash_type"] as? String, "\(where_) hash type")
            let validations = fields["boot_validation"] as? [[String: Any]] ?? []
            #expect(command.bootValidation.map(\.type.description) == validations.compactMap { $0["type"] as? String }, "\(where_)")
            #expect(command.bootValidation.map(\.bytes.hexString) == validations.compactMap { $0["bytes_hex"] as? String }, "\(where_)")
            // Re-encoding nrfutil's explicit-field layout gives the same bytes.
            #expect(command.encode() == secure.initCommandBytes, "\(where_) re-encode")
        case "legacy":
            let legacy = try #require(part.legacyInit, "\(where_) should be Legacy")
            #expect(legacy.crc16.map(Int.init) == initPacket["crc16"] as? Int, "\(where_) crc16")
            #expect(legacy.deviceType.map(Int.init) == initPacket["device_type"] as? Int, "\(where_)")
            #expect(legacy.deviceRevision.map(Int.init) == initPacket["device_revision"] as? Int, "\(where_)")
            #expect(legacy.applicationVersion.map(Int.init) == initPacket["application_version"] as? Int, "\(where_)")
            let req = (initPacket["softdevice_req"] as? [String] ?? []).compactMap { UInt16($0.dropFirst(2), radix: 16) }
            #expect(legacy.softdeviceReq == req, "\(where_) sd_req")
        default:
            Issue.record("\(where_): unknown expected format \(String(describing: initPacket["format"]))")
        }
    }

    private func checkVerification(_ report: PartVerification, _ part: PackagePart, _ image: [String: Any], in name: String) throws {
        let where_ = "\(name) \(part.kind)"
        let initPacket = try #require(image["init_packet"] as? [String: Any])
        let checks = initPacket["checks"] as? [String: Bool] ?? [:]
        if checks["hash_equals_sha256_reversed"] == true { #expect(report.hash == .matches, "\(where_)") }
        if checks["hash_equals_sha256_plain"] == true { #expect(report.hash == .matchesPlainOrder, "\(where_)") }
        if checks["crc16_matches_bin"] == true { #expect(report.hash == .crc16Matches, "\(where_)") }
        if checks["crc16_matches_bin"] == false { #expect(report.hash == .mismatch, "\(where_)") }
        let ios = checks["sig_verifies_over_InitCommand_bytes[ios_dfu_testapp_key.pem]"] == true
        let sdk160 = checks["sig_verifies_over_InitCommand_bytes[sdk160_pcnrfutil_tests_key.pem]"] == true
        if ios {
            #expect(report.signature == .valid(keyIndex: 0), "\(where_)")
        } else if sdk160 {
            #expect(report.signature == .valid(keyIndex: 1), "\(where_)")
        } else if initPacket["signed"] as? Bool == true {
            #expect(report.signature == .invalid, "\(where_)")
        } else {
            #expect(report.signature == .unsigned, "\(where_)")
        }
        // Apart from signatures by unknown keys (and unsigned parts checked with keys), real packages are consistent.
        let other = report.errors.filter { $0.code != .signatureInvalid }
        #expect(other.isEmpty, "\(where_): \(other.map(\.message))")
    }
}
