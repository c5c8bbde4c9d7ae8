import BLECore
import Crypto
import Foundation
import SwiftProtobuf
import Testing

@testable import DFUPackage

/// The swift-protobuf generated code (`Generated/*.pb.swift` from `Proto/dfu-cc.proto`) against nrfutil's bytes.
@Suite(.timeLimit(.minutes(3))) struct ProtobufTests {
    /// Every Secure part of the real packages, with its package name.
    static func realSecureParts() throws -> [(name: String, part: PackagePart, packet: SecureInitPacket)] {
        var parts: [(name: String, part: PackagePart, packet: SecureInitPacket)] = []
        for record in try Corpus.expected() {
            let path = try #require(record["package"] as? String)
            let package = try FirmwarePackage(contentsOf: Corpus.packageURL(path))
            for part in package.parts {
                if let packet = part.secureInit { parts.append((Corpus.packageURL(path).lastPathComponent, part, packet)) }
            }
        }
        return parts
    }

    /// Decoding a real `.dat` with the generated `Dfu_Packet` and serializing it again gives the file's bytes:
    /// swift-protobuf writes fields in nrfutil's (Python protobuf's) order.
    @Test(.enabled(if: Corpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func realInitPacketsReencodeByteForByte() throws {
        let parts = try Self.realSecureParts()
        #expect(parts.count > 100)
        for (name, part, packet) in parts {
            let message = try Dfu_Packet(serializedBytes: part.initPacketBytes)
            #expect(try message.serializedBytes() == part.initPacketBytes, "\(name) \(part.kind)")
            #expect(packet.encode() == part.initPacketBytes, "\(name) \(part.kind)")
            let command = message.hasSignedCommand ? message.signedCommand.command : message.command
            #expect(command.opCode == .init_ && command.hasInit_p, "\(name) \(part.kind)")
            #expect(try command.init_p.serializedBytes() == packet.initCommandBytes, "\(name) \(part.kind)")
        }
    }

    /// `PackageBuilder` output compared with a real nrfutil `.dat` re-encoded by the generated code: identical for
    /// unsigned parts; for signed parts identical up to the 64 signature bytes (ECDSA signatures are random), which
    /// verify with the builder's key.
    @Test(.enabled(if: Corpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func builderMatchesRealDatFiles() throws {
        let key = P256.Signing.PrivateKey()
        var unsigned = 0
        var signed = 0
        for (name, part, packet) in try Self.realSecureParts() {
            let command = packet.command
            guard command.isDebug != nil, !command.bootValidation.isEmpty,
                !command.bootValidation.contains(where: { $0.type == .ecdsaP256Sha256 }),
                let builder = Self.builder(rebuilding: part, command)
            else { continue }
            var signing = builder
            signing.signingKey = packet.isSigned ? key : nil
            let dat = try #require(try signing.files().first { $0.name.hasSuffix(".dat") }).bytes
            let real: [UInt8] = try Dfu_Packet(serializedBytes: part.initPacketBytes).serializedBytes()
            if packet.isSigned {
                #expect(dat.count == real.count && dat.dropLast(64) == real.dropLast(64), "\(name) \(part.kind)")
                let built = try SecureInitPacket(decoding: dat)
                #expect(NordicSignature.isValid(stored: built.signature ?? [], over: built.initCommandBytes, key: key.publicKey))
                signed += 1
            } else {
                #expect(dat == real, "\(name) \(part.kind)")
                unsigned += 1
            }
        }
        #expect(unsigned >= 1 && signed >= 40, "unsigned \(unsigned), signed \(signed)")
    }

    /// A builder with a real part's parameters.
    static func builder(rebuilding part: PackagePart, _ command: InitCommand) -> PackageBuilder? {
        guard let type = command.type, let validation = command.bootValidation.first?.type else { return nil }
        var builder = PackageBuilder()
        builder.hwVersion = command.hwVersion
        builder.sdReq = command.sdReq
        builder.debugMode = command.isDebug ?? false
        switch type {
        case .application, .externalApplication:
            builder.application = .init(stem: "a", bytes: part.image)
            builder.applicationVersion = command.fwVersion
            builder.externalApplication = type == .externalApplication
            builder.appBootValidation = validation
        case .bootloader:
            builder.bootloader = .init(stem: "b", bytes: part.image)
            builder.bootloaderVersion = command.fwVersion
        case .softdevice:
            builder.softdevice = .init(stem: "s", bytes: part.image)
            builder.sdBootValidation = validation
        case .softdeviceBootloader:
            let sd = Int(command.sdSize ?? 0)
            builder.softdevice = .init(stem: "s", bytes: Array(part.image.prefix(sd)))
            builder.bootloader = .init(stem: "b", bytes: Array(part.image.dropFirst(sd)))
            builder.bootloaderVersion = command.fwVersion
            builder.sdBootValidation = validation
        default: return nil
        }
        return builder
    }

    /// The signature is checked over the InitCommand bytes as stored, not over a re-serialization: an InitCommand
    /// with an unpacked sd_req and an unknown field (valid protobuf, not what the encoder writes) verifies.
    @Test func signatureCoversStoredBytesNotReencoding() throws {
        let image = Fixtures.image(256)
        // fw 1, hw 52, sd_req 0xB7 unpacked, APPLICATION, app_size 256, hash{SHA256, reversed}, unknown field 15 = 1.
        let stored: [UInt8] = [0x08, 0x01, 0x10, 0x34, 0x18, 0xB7, 0x01, 0x20, 0x00, 0x38, 0x80, 0x02, 0x42, 0x24, 0x08, 0x03, 0x12, 0x20]
            + Array(SHA256.hash(data: image)).reversed() + [0x78, 0x01]
        let command = try InitCommand(decoding: stored)
        #expect(command.sdReq == [0xB7] && command.appSize == 256)
        #expect(command.encode() != stored, "the encoder packs sd_req and drops unknown fields")
        let key = P256.Signing.PrivateKey()
        var packet = SecureInitPacket(command: command, signature: try NordicSignature.sign(stored, with: key))
        packet.initCommandBytes = stored
        let dat = packet.encode()
        let decoded = try SecureInitPacket(decoding: dat)
        #expect(decoded.initCommandBytes == stored)
        let files: [(name: String, bytes: [UInt8])] = [
            ("a.bin", image), ("a.dat", dat),
            ("manifest.json", Manifest(parts: [.init(kind: .application, binFile: "a.bin", datFile: "a.dat")]).encoded()),
        ]
        let report = try FirmwarePackage(bytes: try ArchiveWriter.archive(files)).verify(keys: [key.publicKey])
        #expect(report.isValid, "\(report.errors)")
        #expect(report.parts.first?.signature == .valid(keyIndex: 0))
        #expect(!NordicSignature.isValid(stored: decoded.signature ?? [], over: command.encode(), key: key.publicKey))
    }

    /// Enum values newer than the schema (proto2 enums are closed) survive decoding and re-encoding.
    @Test func enumValuesOutsideTheSchemaRoundTrip() throws {
        let command = InitCommand(
            fwVersion: 1, type: FirmwareType(rawValue: 9), hash: ImageHash(type: HashType(rawValue: 7), bytes: [1, 2]),
            bootValidation: [BootValidation(type: ValidationType(rawValue: 8), bytes: [3]), BootValidation(type: .crc)])
        let bytes = command.encode()
        // Known fields first, in number order; the unknown type (field 4) after them, as protobuf writes unknown fields.
        #expect(bytes == [0x08, 0x01, 0x42, 0x06, 0x12, 0x02, 0x01, 0x02, 0x08, 0x07, 0x52, 0x05, 0x12, 0x01, 0x03, 0x08, 0x08,
                          0x52, 0x04, 0x08, 0x01, 0x12, 0x00, 0x20, 0x09])
        #expect(try InitCommand(decoding: bytes) == command)
        // A signature type other than ECDSA survives too.
        var packet = SecureInitPacket(command: command, signature: [UInt8](repeating: 0xAB, count: 64))
        packet.signatureType = 5
        #expect(try SecureInitPacket(decoding: packet.encode()).signatureType == 5)
    }
}
