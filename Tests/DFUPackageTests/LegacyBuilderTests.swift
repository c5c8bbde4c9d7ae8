import BLECore
import Crypto
import Foundation
import Testing

@testable import DFUPackage

/// Legacy package creation (nrfutil 0.5 `dfu genpkg`, `PackageBuilder.legacy`), read back by the package reader.
@Suite(.timeLimit(.minutes(3))) struct LegacyBuilderTests {
    static func appBuilder(_ layout: LegacyInitPacket.Layout = .v05, size: Int = 1000) -> PackageBuilder {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: Fixtures.image(size))
        builder.applicationVersion = 7
        builder.sdReq = [0x64, 0x80]
        builder.legacy = LegacyOptions(layout: layout, deviceType: 0x52, deviceRevision: 0xADAF)
        return builder
    }

    @Test func applicationV05HasNrfutilLayout() throws {
        let files = try Self.appBuilder().files()
        #expect(files.map(\.name) == ["app.bin", "app.dat", "manifest.json"])
        let crc = CRC16.ccittFalse(Fixtures.image(1000))
        // device_type 0x0052, device_revision 0xADAF, application_version 7, sd_req [0x64, 0x80], crc16.
        #expect(files[1].bytes == [0x52, 0x00, 0xAF, 0xAD, 0x07, 0, 0, 0, 0x02, 0x00, 0x64, 0x00, 0x80, 0x00, UInt8(crc & 0xFF), UInt8(crc >> 8)])
        #expect(String(decoding: files[2].bytes, as: UTF8.self) == """
            {
                "manifest": {
                    "application": {
                        "bin_file": "app.bin",
                        "dat_file": "app.dat",
                        "init_packet_data": {
                            "application_version": 7,
                            "device_revision": 44463,
                            "device_type": 82,
                            "firmware_crc16": \(crc),
                            "softdevice_req": [
                                100,
                                128
                            ]
                        }
                    },
                    "dfu_version": 0.5
                }
            }
            """)
        let package = try FirmwarePackage(bytes: try ArchiveWriter.archive(files))
        #expect(package.format == .legacy && package.manifest.dfuVersion == 0.5 && package.warnings.isEmpty)
        let legacy = try #require(package.part(.application)?.legacyInit)
        #expect(legacy.layout == .v05 && legacy.deviceType == 0x52 && legacy.softdeviceReq == [0x64, 0x80] && legacy.crc16 == crc)
        let report = package.verify()
        #expect(report.isValid && report.parts.first?.hash == .crc16Matches)
    }

    @Test func layoutsV06V07AndDefaults() throws {
        let v06 = try FirmwarePackage(bytes: try Self.appBuilder(.v06).archive())
        #expect(v06.part(.application)?.legacyInit?.layout == .v06 && v06.part(.application)?.initPacketBytes.count == 20)
        #expect(v06.manifest.dfuVersion == 0.6 && v06.verify().parts.first?.hash == .crc16Matches)
        let v07 = try FirmwarePackage(bytes: try Self.appBuilder(.v07, size: 1001).archive())
        let packet = try #require(v07.part(.application)?.legacyInit)
        #expect(packet.layout == .v07 && packet.firmwareLength == 1004 && packet.sha256 == Array(SHA256.hash(data: v07.parts[0].image)))
        #expect(v07.verify().isValid && v07.verify().parts.first?.hash == .matches)
        let data = v07.manifest.parts.first?.initPacketData?.object
        #expect(data?["ext_packet_id"]?.number == 1 && data?["firmware_length"]?.number == 1004 && data?["firmware_crc16"] == nil)
        // nrfutil 0.5 defaults: version 0xFFFFFFFF, type and revision 0xFFFF, sd_req [0xFFFE].
        var plain = PackageBuilder()
        plain.application = PackageBuilder.Image(stem: "x", bytes: [1, 2, 3, 4])
        plain.legacy = LegacyOptions()
        let dat = try #require(try plain.files().first { $0.name == "x.dat" }).bytes
        #expect(Array(dat.prefix(12)) == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00, 0xFE, 0xFF] && dat.count == 14)
    }

    @Test func signedV08AndSoftDeviceBootloader() throws {
        let key = P256.Signing.PrivateKey()
        var builder = Self.appBuilder(.v05)
        builder.softdevice = PackageBuilder.Image(stem: "s130", bytes: Fixtures.image(2000, seed: 2))
        builder.bootloader = PackageBuilder.Image(stem: "bl", bytes: Fixtures.image(500, seed: 3))
        builder.signingKey = key  // a key makes it 0.8, as in nrfutil 0.5
        let files = try builder.files()
        #expect(files.map(\.name) == ["app.bin", "app.dat", "manifest.json", "sd_bl.bin", "sd_bl.dat"])
        let package = try FirmwarePackage(bytes: try ArchiveWriter.archive(files))
        #expect(package.manifest.dfuVersion == 0.8 && package.parts.map(\.kind) == [.softdeviceBootloader, .application])
        let sdbl = try #require(package.part(.softdeviceBootloader))
        #expect(sdbl.manifestSDSize == 2000 && sdbl.manifestBLSize == 500 && sdbl.initPacketBytes.count == 118)
        #expect(sdbl.legacyInit?.layout == .v08 && sdbl.legacyInit?.firmwareLength == 2500)
        let manifest = String(decoding: files[2].bytes, as: UTF8.self)
        #expect(manifest.contains("\"bl_size\": 500,") && manifest.contains("\"sd_size\": 2000") && !manifest.contains("info_read_only_metadata"))
        let good = package.verify(keys: [key.publicKey])
        #expect(good.isValid, "\(good.errors)")
        #expect(good.parts.map(\.signature) == [.valid(keyIndex: 0), .valid(keyIndex: 0)])
        let wrong = package.verify(keys: [P256.Signing.PrivateKey().publicKey])
        #expect(wrong.errors.map(\.message) == [
            "softdevice_bootloader: legacy init packet signature does not verify with any given key",
            "application: legacy init packet signature does not verify with any given key",
        ])
    }

    @Test func legacyRules() throws {
        var secureOption = Self.appBuilder()
        secureOption.hwVersion = 52
        #expect(throws: PackageError(.invalidOptions, "")) { try secureOption.files() }
        var validation = Self.appBuilder()
        validation.appBootValidation = .sha256
        #expect(throws: PackageError(.invalidOptions, "")) { try validation.files() }
        var wide = Self.appBuilder()
        wide.sdReq = [0x1_0000]
        #expect(throws: PackageError(.invalidOptions, "")) { try wide.files() }
        #expect(throws: PackageError(.invalidOptions, "")) { try Self.appBuilder(.v08).files() }  // 0.8 needs a key
        #expect(LegacyInitPacket.Layout(dfuVersion: 0.7) == .v07 && LegacyInitPacket.Layout(dfuVersion: 0.9) == nil)
    }

    /// nrfutil 0.5 compatibility: every real 0.5 package whose manifest agrees with its `.dat` (edge case 8 of
    /// dfu-packages.md is the exception) is rebuilt with the same inputs into identical `.dat` files and an
    /// identical manifest (line endings aside).
    @Test(.enabled(if: Corpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func rebuildsRealLegacyPackages() throws {
        var rebuilt = 0
        for record in try Corpus.expected() {
            let path = try #require(record["package"] as? String)
            let package = try FirmwarePackage(contentsOf: Corpus.packageURL(path))
            guard package.manifest.dfuVersion == 0.5, let first = package.parts.first?.legacyInit, first.layout == .v05,
                package.parts.allSatisfy({ part in
                    part.legacyInit.map { PackageBuilder.initPacketData($0) == part.manifest(in: package)?.initPacketData } ?? false
                })
            else { continue }
            var builder = PackageBuilder()
            builder.applicationVersion = first.applicationVersion
            builder.sdReq = first.softdeviceReq.map(UInt32.init)
            builder.legacy = LegacyOptions(layout: .v05, deviceType: first.deviceType ?? 0, deviceRevision: first.deviceRevision ?? 0)
            for part in package.parts {
                let stem = String(part.binFile.dropLast(4))
                switch part.kind {
                case .application: builder.application = .init(stem: stem, bytes: part.image)
                case .softdevice: builder.softdevice = .init(stem: stem, bytes: part.image)
                case .bootloader: builder.bootloader = .init(stem: stem, bytes: part.image)
                case .softdeviceBootloader:
                    let sd = Int(part.manifestSDSize ?? 0)
                    builder.softdevice = .init(stem: "sd", bytes: Array(part.image.prefix(sd)))
                    builder.bootloader = .init(stem: "bl", bytes: Array(part.image.dropFirst(sd)))
                }
            }
            let files = try builder.files()
            let name = Corpus.packageURL(path).lastPathComponent
            for part in package.parts {
                #expect(files.first { $0.name == part.datFile }?.bytes == part.initPacketBytes, "\(name) \(part.datFile)")
            }
            let manifest = files.first { $0.name == "manifest.json" }.map { String(decoding: $0.bytes, as: UTF8.self) }
            let real = try ArchiveReader.read(try Data(contentsOf: Corpus.packageURL(path)), limits: ArchiveLimits()).files["manifest.json"]
            #expect(manifest == real.map { String(decoding: $0, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n") }, "\(name)")
            rebuilt += 1
        }
        #expect(rebuilt >= 8, "rebuilt \(rebuilt)")
    }
}

extension PackagePart {
    /// This part's manifest entry.
    func manifest(in package: FirmwarePackage) -> Manifest.Part? { package.manifest.parts.first { $0.kind == kind } }
}
