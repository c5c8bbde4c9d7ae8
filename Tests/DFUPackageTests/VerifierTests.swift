import BLECore
import Crypto
import Foundation
import Testing

@testable import DFUPackage

@Suite(.timeLimit(.minutes(3))) struct VerifierTests {
    /// The base app package with its .dat replaced by one made from `change`d command.
    func package(image: [UInt8]? = nil, _ change: (inout InitCommand) -> Void = { _ in }) throws -> FirmwarePackage {
        var zip = ZipFixture(try Fixtures.appFiles())
        let dat = try #require(zip.entries.first { $0.name == "app.dat" }).data
        var command = try SecureInitPacket(decoding: dat).command
        change(&command)
        zip.set("app.dat", SecureInitPacket(command: command).encode())
        if let image { zip.set("app.bin", image) }
        return try FirmwarePackage(bytes: zip.bytes)
    }

    @Test func tamperedImageNamesPartAndField() throws {
        var image = Fixtures.image(1000)
        image[10] ^= 1
        let report = try package(image: image).verify()
        #expect(!report.isValid)
        #expect(report.parts.first?.hash == .mismatch)
        let message = try #require(report.errors.first?.message)
        #expect(message.hasPrefix("application: init packet hash does not match app.bin (SHA-256 "))
        #expect(report.errors.first?.code == .imageMismatch)
    }

    @Test func sizeAndTypeMismatches() throws {
        let size = try package { $0.appSize = 1004 }.verify()
        #expect(size.errors.map(\.message) == ["application: init packet app_size 1004 does not match app.bin (1000 bytes)"])
        let type = try package { $0.type = .bootloader; $0.blSize = 1000 }.verify()
        #expect(type.errors.map(\.message) == ["application: init packet type BOOTLOADER does not match the manifest key application"])
        let external = try package { $0.type = .externalApplication }.verify()
        #expect(external.isValid)
    }

    @Test func plainOrderHashIsAcceptedWithWarning() throws {
        let report = try package { $0.hash?.bytes.reverse() }.verify()
        #expect(report.isValid)
        #expect(report.parts.first?.hash == .matchesPlainOrder)
        #expect(report.warnings.count == 1)
    }

    @Test func unsignedWithKeyIsAnError() throws {
        let report = try package().verify(keys: [P256.Signing.PrivateKey().publicKey])
        #expect(report.errors.map(\.message) == ["application: init packet is not signed but a key was given"])
        #expect(report.errors.first?.code == .signatureInvalid)  // exit 38 (ExitCodeRegistryTests)
    }

    @Test func signedWithoutKeyIsReportedNotFailed() throws {
        let package = try FirmwarePackage(bytes: try Fixtures.appBuilder(key: P256.Signing.PrivateKey()).archive())
        let report = package.verify()
        #expect(report.isValid)
        #expect(report.parts.first?.signature == .noKeyGiven)
    }

    @Test func legacyCRCAndSignature() throws {
        let image = Fixtures.image(64)
        let crc = CRC16.ccittFalse(image)
        var dat = ByteWriter()
        for value: UInt16 in [0xFFFF, 0xFFFF] { dat.write(value) }
        dat.write(UInt32(1))
        dat.write(UInt16(1))
        dat.write(UInt16(0xFFFE))
        var good = dat
        good.write(crc)
        var bad = dat
        bad.write(crc ^ 1)
        let manifest = #"{"manifest":{"application":{"bin_file":"a.bin","dat_file":"a.dat","init_packet_data":{"firmware_crc16":1}},"dfu_version":0.5}}"#
        func make(_ datBytes: [UInt8]) throws -> FirmwarePackage {
            try FirmwarePackage(bytes: ZipFixture([("manifest.json", Array(manifest.utf8)), ("a.bin", image), ("a.dat", datBytes)]).bytes)
        }
        let ok = try make(good.bytes)
        #expect(ok.format == .legacy && ok.manifest.dfuVersion == 0.5)
        #expect(ok.verify().parts.first?.hash == .crc16Matches)
        #expect(ok.verify().isValid)
        let broken = try make(bad.bytes).verify()
        #expect(broken.errors.first?.message.hasPrefix("application: init packet CRC-16") == true)
        // 0.8: plain big-endian r‖s over the preceding bytes.
        let key = P256.Signing.PrivateKey()
        var v08 = dat
        v08.write(UInt32(2))
        v08.write(UInt32(image.count))
        v08.write(contentsOf: SHA256.hash(data: image))
        let signature = Array(try key.signature(for: v08.bytes).rawRepresentation)
        let signed = try make(v08.bytes + signature)
        #expect(signed.verify(keys: [key.publicKey]).parts.first?.signature == .valid(keyIndex: 0))
        #expect(signed.verify(keys: [key.publicKey]).parts.first?.hash == .matches)
        #expect(!signed.verify(keys: [P256.Signing.PrivateKey().publicKey]).isValid)
    }

    @Test func manifestVariantsAndWarnings() throws {
        let files = try Fixtures.sdBlAppBuilder().files()
        var zip = ZipFixture(files)
        // CRLF, sizes directly in the object, an unknown key, entries reordered, app.bin deflated.
        let text = "{\r\n    \"manifest\": {\r\n        \"application\": {\"bin_file\": \"app.bin\", \"dat_file\": \"app.dat\", \"extra\": 1},\r\n"
            + "        \"softdevice_bootloader\": {\"bin_file\": \"sd_bl.bin\", \"bl_size\": 500, \"dat_file\": \"sd_bl.dat\", \"sd_size\": 2000}\r\n    },\r\n    \"comment\": \"x\"\r\n}"
        zip.set("manifest.json", Array(text.utf8))
        zip.entries.reverse()
        zip.modify("app.bin") { $0.method = 8 }
        let package = try FirmwarePackage(bytes: zip.bytes)
        #expect(package.parts.map(\.kind) == [.softdeviceBootloader, .application])
        #expect(package.part(.softdeviceBootloader)?.manifestSDSize == 2000)
        #expect(package.warnings.sorted() == [
            "manifest.json: unknown key 'application.extra' ignored", "manifest.json: unknown key 'comment' ignored",
        ])
        #expect(package.entries.first { $0.name == "app.bin" }?.isCompressed == true)
        #expect(package.verify().isValid)
        // Wrong manifest sizes are reported.
        zip.set("manifest.json", Array(text.replacingOccurrences(of: "\"bl_size\": 500", with: "\"bl_size\": 501").utf8))
        let wrong = try FirmwarePackage(bytes: zip.bytes).verify()
        #expect(wrong.errors.map(\.message) == ["softdevice_bootloader: manifest bl_size 501 differs from the init packet"])
    }

    /// ECDSA boot validation signatures (`VALIDATE_ECDSA_P256_SHA256`) are checked with the given keys, over the
    /// image as the bootloader checks it at boot; the init packet itself is signed and valid in every case.
    @Test func bootValidationSignatures() throws {
        let key = P256.Signing.PrivateKey()
        let image = Fixtures.image(1000)
        func package(bootSignature: [UInt8]) throws -> FirmwarePackage {
            var zip = ZipFixture(try Fixtures.appFiles())
            let dat = try #require(zip.entries.first { $0.name == "app.dat" }).data
            var command = try SecureInitPacket(decoding: dat).command
            command.bootValidation = [BootValidation(type: .ecdsaP256Sha256, bytes: bootSignature)]
            let signature = try NordicSignature.sign(command.encode(), with: key)
            zip.set("app.dat", SecureInitPacket(command: command, signature: signature).encode())
            return try FirmwarePackage(bytes: zip.bytes)
        }
        let good = try package(bootSignature: try NordicSignature.sign(image, with: key))
        let report = good.verify(keys: [P256.Signing.PrivateKey().publicKey, key.publicKey])
        #expect(report.isValid, "\(report.errors)")
        #expect(report.parts.first?.signature == .valid(keyIndex: 1))
        #expect(report.parts.first?.bootSignatures == [.valid(keyIndex: 1)])
        #expect(good.verify().parts.first?.bootSignatures == [.noKeyGiven])
        #expect(good.verify().isValid)
        // Signed by the right key over other bytes: the init packet verifies, the boot validation does not.
        var other = image
        other[0] ^= 0xFF
        let wrongImage = try package(bootSignature: try NordicSignature.sign(other, with: key)).verify(keys: [key.publicKey])
        #expect(wrongImage.parts.first?.signature == .valid(keyIndex: 0))
        #expect(wrongImage.parts.first?.bootSignatures == [.invalid])
        #expect(wrongImage.errors.map(\.message) == [
            "application: boot_validation[0] VALIDATE_ECDSA_P256_SHA256 signature does not verify over app.bin with any given key"
        ])
        #expect(wrongImage.errors.first?.code == .signatureInvalid)
        let short = try package(bootSignature: [UInt8](repeating: 1, count: 63)).verify()
        #expect(short.errors.map(\.message) == ["application: boot_validation[0] VALIDATE_ECDSA_P256_SHA256 signature is 63 bytes, expected 64"])
    }

    /// For SD+BL the SoftDevice's ECDSA boot signature covers only the first sd_size bytes of sd_bl.bin.
    @Test func softdeviceBootValidationCoversTheSoftDevice() throws {
        let key = P256.Signing.PrivateKey()
        var builder = Fixtures.sdBlAppBuilder(key: key)
        builder.sdBootValidation = .ecdsaP256Sha256
        let package = try FirmwarePackage(bytes: try builder.archive())
        let report = package.verify(keys: [key.publicKey])
        #expect(report.isValid, "\(report.errors)")
        #expect(report.parts.map(\.bootSignatures) == [[.valid(keyIndex: 0)], []])
        // The same signature over the whole sd_bl.bin (SD and BL) is not what the bootloader checks.
        var zip = ZipFixture(try builder.files())
        let dat = try #require(zip.entries.first { $0.name == "sd_bl.dat" }).data
        var command = try SecureInitPacket(decoding: dat).command
        let whole = Fixtures.image(2000, seed: 2) + Fixtures.image(500, seed: 3)
        command.bootValidation[0].bytes = try NordicSignature.sign(whole, with: key)
        zip.set("sd_bl.dat", SecureInitPacket(command: command, signature: try NordicSignature.sign(command.encode(), with: key)).encode())
        let wrong = try FirmwarePackage(bytes: zip.bytes).verify(keys: [key.publicKey])
        #expect(wrong.errors.map(\.message) == [
            "softdevice_bootloader: boot_validation[0] VALIDATE_ECDSA_P256_SHA256 signature does not verify over the SoftDevice part of sd_bl.bin with any given key"
        ])
    }
}
