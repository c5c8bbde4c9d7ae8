import BLECore
import Crypto
import Foundation
import Testing

@testable import DFUPackage

@Suite(.timeLimit(.minutes(3))) struct BuilderTests {
    @Test func applicationPackageHasNrfutilLayout() throws {
        let files = try Fixtures.appBuilder().files()
        #expect(files.map(\.name) == ["app.bin", "app.dat", "manifest.json"])
        let manifest = String(decoding: try #require(files.last).bytes, as: UTF8.self)
        #expect(manifest == """
            {
                "manifest": {
                    "application": {
                        "bin_file": "app.bin",
                        "dat_file": "app.dat"
                    }
                }
            }
            """)
        let image = Fixtures.image(1000)
        let digest = Array(SHA256.hash(data: image))
        // fw 3, hw 52, sd_req [0xB7], APPLICATION, sd 0, bl 0, app 1000, hash{SHA256, reversed}, is_debug 0, [CRC].
        let initBytes: [UInt8] = [0x08, 0x03, 0x10, 0x34, 0x1A, 0x02, 0xB7, 0x01, 0x20, 0x00, 0x28, 0x00, 0x30, 0x00, 0x38, 0xE8, 0x07,
                                  0x42, 0x24, 0x08, 0x03, 0x12, 0x20] + digest.reversed() + [0x48, 0x00, 0x52, 0x04, 0x08, 0x01, 0x12, 0x00]
        let dat = try SecureInitPacket(decoding: files[1].bytes)
        #expect(dat.initCommandBytes == initBytes)
        #expect(files[1].bytes == [0x0A, UInt8(initBytes.count + 4), 0x08, 0x01, 0x12, UInt8(initBytes.count)] + initBytes)
    }

    @Test func readsBackAndVerifies() throws {
        let builder = Fixtures.appBuilder(size: 1001)
        let archive = try builder.archive()
        #expect(try builder.archive() == archive, "unsigned output is deterministic")
        let package = try FirmwarePackage(bytes: archive)
        #expect(package.format == .secure)
        #expect(package.warnings.isEmpty)
        let part = try #require(package.part(.application))
        #expect(part.image.count == 1004, "padded to 4 bytes with 0xFF")
        #expect(part.image.suffix(3) == [0xFF, 0xFF, 0xFF])
        let report = package.verify()
        #expect(report.isValid)
        #expect(report.parts.first?.hash == .matches)
        #expect(report.parts.first?.signature == .unsigned)
    }

    @Test func softdeviceBootloaderApplication() throws {
        let files = try Fixtures.sdBlAppBuilder().files()
        #expect(files.map(\.name) == ["app.bin", "app.dat", "manifest.json", "sd_bl.bin", "sd_bl.dat"])
        let package = try FirmwarePackage(bytes: try ArchiveWriter.archive(files))
        #expect(package.parts.map(\.kind) == [.softdeviceBootloader, .application])
        let sdbl = try #require(package.parts.first)
        #expect(sdbl.image == Fixtures.image(2000, seed: 2) + Fixtures.image(500, seed: 3))
        #expect(sdbl.manifestSDSize == 2000 && sdbl.manifestBLSize == 500)
        let command = try #require(sdbl.initCommand)
        #expect(command.type == .softdeviceBootloader && command.sdSize == 2000 && command.blSize == 500 && command.appSize == 0)
        #expect(command.fwVersion == 2)
        #expect(command.sdReq == [0xB7, 0x101])
        #expect(command.bootValidation.map(\.type) == [.crc, .crc])
        #expect(package.part(.application)?.initCommand?.sdReq == [0x101])
        #expect(sdbl.sizes.softdevice == 2000 && sdbl.sizes.bootloader == 500)
        #expect(package.verify().isValid)
        let manifest = String(decoding: files[2].bytes, as: UTF8.self)
        #expect(manifest.contains("\"info_read_only_metadata\": {\n                \"bl_size\": 500,\n                \"sd_size\": 2000\n"))
    }

    @Test func signedPackageAndBootValidationSignatures() throws {
        let key = P256.Signing.PrivateKey()
        var builder = Fixtures.sdBlAppBuilder(key: key)
        builder.sdBootValidation = .ecdsaP256Sha256
        builder.appBootValidation = .ecdsaP256Sha256
        let package = try FirmwarePackage(bytes: try builder.archive())
        let report = package.verify(keys: [P256.Signing.PrivateKey().publicKey, key.publicKey])
        #expect(report.isValid, "\(report.errors)")
        #expect(report.parts.map(\.signature) == [.valid(keyIndex: 1), .valid(keyIndex: 1)])
        let sdbl = try #require(package.part(.softdeviceBootloader)?.initCommand)
        #expect(sdbl.bootValidation.map(\.type) == [.ecdsaP256Sha256, .crc])
        let sdSignature = try #require(sdbl.bootValidation.first?.bytes)
        #expect(NordicSignature.isValid(stored: sdSignature, over: Fixtures.image(2000, seed: 2), key: key.publicKey))
        let app = try #require(package.part(.application))
        let appSignature = try #require(app.initCommand?.bootValidation.first?.bytes)
        #expect(NordicSignature.isValid(stored: appSignature, over: app.image, key: key.publicKey))
        #expect(!NordicSignature.isValid(raw: appSignature, over: app.image, key: key.publicKey), "halves are reversed")
        // A wrong key fails, naming the part.
        let wrong = package.verify(keys: [P256.Signing.PrivateKey().publicKey])
        #expect(!wrong.isValid)
        #expect(wrong.errors.map(\.message).contains("application: init packet signature does not verify with any given key"))
    }

    @Test func nrfutilRules() throws {
        var builder = Fixtures.appBuilder()
        builder.bootloader = PackageBuilder.Image(stem: "bl", bytes: [1, 2, 3, 4])
        builder.bootloaderVersion = 1
        #expect(throws: PackageError(.invalidOptions, "")) { try builder.files() }
        var noHW = Fixtures.appBuilder()
        noHW.hwVersion = nil
        #expect(throws: PackageError(.invalidOptions, "")) { try noHW.files() }
        var debug = PackageBuilder()
        debug.debugMode = true
        debug.application = PackageBuilder.Image(stem: "x", bytes: [1, 2, 3, 4])
        let command = try SecureInitPacket(decoding: try #require(try debug.files().first { $0.name == "x.dat" }).bytes).command
        #expect(command.hwVersion == 0xFFFF_FFFF && command.fwVersion == 0xFFFF_FFFF && command.sdReq == [0xFFFE])
        #expect(command.isDebug == true)
        var sdApp = Fixtures.appBuilder()
        sdApp.softdevice = PackageBuilder.Image(stem: "sd", bytes: [1, 2, 3, 4])
        #expect(throws: PackageError(.invalidOptions, "")) { try sdApp.files() }  // needs --sd-id
        var ecdsaNoKey = Fixtures.appBuilder()
        ecdsaNoKey.appBootValidation = .ecdsaP256Sha256
        #expect(throws: PackageError(.invalidOptions, "")) { try ecdsaNoKey.files() }
        #expect(try PackageBuilder.version(string: "2.7.31") == 20731)
        #expect(throws: PackageError.self) { try PackageBuilder.version(string: "2.7") }
        #expect(ValidationType(name: "VALIDATE_GENERATED_SHA256") == .sha256)
    }

    @Test func intelHexIsNormalized() throws {
        // MBR byte at 0x0000, data at 0x1000..0x1002 and 0x1006, UICR at 0x10001014 (ext linear address 0x1000).
        func record(_ address: UInt16, _ type: UInt8, _ data: [UInt8]) -> String {
            let bytes = [UInt8(data.count), UInt8(address >> 8), UInt8(address & 0xFF), type] + data
            let checksum = UInt8(truncatingIfNeeded: 0 &- Int(bytes.reduce(UInt8(0), &+)))
            return ":" + (bytes + [checksum]).hexString.uppercased()
        }
        let text = [
            record(0x0000, 0, [0xAA, 0xBB]), record(0x1000, 0, [1, 2, 3]), record(0x1006, 0, [7]),
            record(0x0000, 4, [0x10, 0x00]), record(0x1014, 0, [0x55]), record(0, 1, []),
        ].joined(separator: "\r\n")
        #expect(try IntelHex.binary(from: text) == [1, 2, 3, 0xFF, 0xFF, 0xFF, 7, 0xFF])
        #expect(throws: PackageError.self) { try IntelHex.binary(from: text.replacingOccurrences(of: ":03100000010203", with: ":03100000010204")) }
        #expect(throws: PackageError.self) { try IntelHex.binary(from: record(0x1000, 0, [1])) }  // no EOF record
        #expect(throws: PackageError.self) { try IntelHex.binary(from: record(0x0000, 0, [1]) + "\n" + record(0, 1, [])) }  // only MBR
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-test-\(UUID().uuidString).hex")
        try Data(text.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let image = try PackageBuilder.Image.load(url)
        #expect(image.stem.hasPrefix("bledfu-test-") && image.bytes.count == 8)
    }

    @Test func keysRoundTripThroughPEM() throws {
        let pem = PackageKeys.generatePrivateKeyPEM()
        #expect(pem.hasPrefix("-----BEGIN EC PRIVATE KEY-----\n"))
        let key = try PackageKeys.privateKey(pem: pem)
        #expect(try PackageKeys.publicKey(pem: pem).rawRepresentation == key.publicKey.rawRepresentation)
        #expect(try PackageKeys.publicKey(pem: key.publicKey.pemRepresentation).rawRepresentation == key.publicKey.rawRepresentation)
        #expect(try PackageKeys.privateKey(pem: key.pemRepresentation).rawRepresentation == key.rawRepresentation)
        #expect(throws: PackageError(.invalidKey, "")) { try PackageKeys.publicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----") }
        #expect(PackageKeys.nrfutilHex(key.publicKey).count == 128)
    }

    /// nrfutil compatibility: rebuilding each real nrfutil ≥ 5 part (every field present, no ECDSA boot
    /// validation) with its own parameters gives the identical InitCommand bytes.
    @Test(.enabled(if: Corpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func rebuildsRealInitCommandsByteForByte() throws {
        var rebuilt = 0
        for record in try Corpus.expected() {
            let path = try #require(record["package"] as? String)
            let package = try FirmwarePackage(contentsOf: Corpus.packageURL(path))
            for part in package.parts {
                guard let real = part.secureInit, let command = part.initCommand, command.isDebug != nil,
                    !command.bootValidation.isEmpty, !command.bootValidation.contains(where: { $0.type == .ecdsaP256Sha256 }),
                    let builder = ProtobufTests.builder(rebuilding: part, command)
                else { continue }
                let dat = try #require(try builder.files().first { $0.name.hasSuffix(".dat") })
                #expect(try SecureInitPacket(decoding: dat.bytes).initCommandBytes == real.initCommandBytes, "\(path) \(part.kind)")
                rebuilt += 1
            }
        }
        #expect(rebuilt >= 40)
    }
}
