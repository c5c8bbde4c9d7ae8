import BLECore
import Testing

@testable import DFUPackage

@Suite(.timeLimit(.minutes(3))) struct SecureInitPacketTests {
    /// IOS-DFU-Library `app_new.zip` app_new.dat (137 bytes, signed):
    /// signed_command{ command{ op_code INIT, init{ fw 10100, hw 0xFFFF, sd_req [0xFFFE], APPLICATION, sd 0, bl 0,
    /// app 66104, hash{SHA256, 8fba…e2a8} } }, signature_type 0, signature 2e7d…b144 }
    static let appNewDat = [UInt8](
        hexString: "1286010a400801123c08f44e10ffff031a03feff0320002800300038b884044224080312208fba8c8db243be7ca83cecb55fa6142d2067d59eb161d12928e4db11df51e2a810001a402e7dfd3c4a0a546f94cfb7c6948101826331e6467c986bb663f1bdf5040f9e819fcfd3e7547f4e9467d4d362257d78a2546a96ec8a250bbff7323f3a8ab8b144"
    ) ?? []

    @Test func decodesSignedRealPacket() throws {
        let packet = try SecureInitPacket(decoding: Self.appNewDat)
        #expect(packet.isSigned)
        #expect(packet.signatureType == 0)
        #expect(packet.signature?.count == 64)
        let c = packet.command
        #expect(c.fwVersion == 10100)
        #expect(c.hwVersion == 0xFFFF)
        #expect(c.sdReq == [0xFFFE])
        #expect(c.type == .application)
        #expect(c.sdSize == 0 && c.blSize == 0)
        #expect(c.appSize == 66104)
        #expect(c.hash?.type == .sha256)
        #expect(c.hash?.bytes.prefix(4) == [0x8F, 0xBA, 0x8C, 0x8D])
        #expect(c.isDebug == nil)
        #expect(c.bootValidation.isEmpty)
        #expect(packet.initCommandBytes.count == 0x3C)
        // Both directions: re-encoding gives the file bytes.
        #expect(packet.encode() == Self.appNewDat)
        #expect(c.encode() == packet.initCommandBytes)
    }

    /// Unsigned: `0a 16 08 01 12 12 08 01 10 34 1a 02 81 02 20 03 48 01 52 04 08 01 12 00`
    /// = command{ INIT, init{ fw 1, hw 52, sd_req [0x101], SOFTDEVICE_BOOTLOADER, is_debug, [CRC] } }.
    @Test func unsignedBothDirections() throws {
        let bytes: [UInt8] = [0x0A, 0x16, 0x08, 0x01, 0x12, 0x12, 0x08, 0x01, 0x10, 0x34, 0x1A, 0x02, 0x81, 0x02, 0x20, 0x03,
                              0x48, 0x01, 0x52, 0x04, 0x08, 0x01, 0x12, 0x00]
        let command = InitCommand(fwVersion: 1, hwVersion: 52, sdReq: [0x101], type: .softdeviceBootloader, isDebug: true,
                                  bootValidation: [BootValidation(type: .crc)])
        #expect(SecureInitPacket(command: command).encode() == bytes)
        let packet = try SecureInitPacket(decoding: bytes)
        #expect(packet.command == command)
        #expect(!packet.isSigned)
        #expect(packet.signature == nil)
        for length in 0..<bytes.count {
            #expect(throws: PackageError.self, "prefix \(length)") { try SecureInitPacket(decoding: Array(bytes.prefix(length))) }
        }
    }

    @Test func acceptsUnpackedSdReqUnknownFieldsAndBigVarints() throws {
        // fw 0xFFFFFFFF (5-byte varint), sd_req unpacked 0xB7 and 0x101, unknown field 15 (varint), 16 (bytes), 17 (fixed32).
        let initBytes: [UInt8] = [0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x18, 0xB7, 0x01, 0x18, 0x81, 0x02,
                                  0x78, 0x05, 0x82, 0x01, 0x01, 0xAA, 0x8D, 0x01, 1, 2, 3, 4, 0x20, 0x04]
        let command = try InitCommand(decoding: initBytes)
        #expect(command.fwVersion == 0xFFFF_FFFF)
        #expect(command.sdReq == [0xB7, 0x101])
        #expect(command.type == .externalApplication)
        // Unknown enum values survive and print.
        let odd = try InitCommand(decoding: [0x20, 0x09, 0x42, 0x04, 0x08, 0x07, 0x12, 0x00])
        #expect(odd.type?.rawValue == 9)
        #expect(odd.type?.description == "FwType(9)")
        #expect(odd.hash?.type.description == "HashType(7)")
    }

    @Test func rejectsMalformed() throws {
        #expect(throws: PackageError.self) { try InitCommand(decoding: [0x08]) }  // truncated varint
        #expect(throws: PackageError.self) { try InitCommand(decoding: [0x42, 0x05, 0x08]) }  // length past end
        #expect(throws: PackageError.self) { try InitCommand(decoding: [0x42, 0x02, 0x08, 0x03]) }  // hash without bytes
        // fw_version (1) as bytes: protobuf (swift-protobuf, nrfutil's Python) keeps a known field with another wire
        // type as an unknown field, so the command decodes without fw_version.
        #expect(try InitCommand(decoding: [0x0A, 0x00, 0x10, 0x34]) == InitCommand(hwVersion: 52))
        #expect(throws: PackageError.self) { try InitCommand(decoding: [0x00, 0x00]) }  // field number 0
        #expect(throws: PackageError.self) { try InitCommand(decoding: [0x08] + [UInt8](repeating: 0xFF, count: 10) + [0x01]) }
        // A signed packet without a signature.
        #expect(throws: PackageError.self) { try SecureInitPacket(decoding: [0x12, 0x04, 0x0A, 0x02, 0x08, 0x01]) }
        // INIT without an InitCommand.
        #expect(throws: PackageError.self) { try SecureInitPacket(decoding: [0x0A, 0x02, 0x08, 0x01]) }
    }
}

@Suite(.timeLimit(.minutes(3))) struct LegacyInitPacketTests {
    /// 0.5: `ff ff ff ff ff ff ff ff 01 00 64 00 38 39` = type/revision 0xFFFF, version 0xFFFFFFFF, sd_req [0x64],
    /// crc16 0x3938 (nRF Toolbox SDK 9 sd_bl.dat).
    @Test func v05() throws {
        let p = try LegacyInitPacket(decoding: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00, 0x64, 0x00, 0x38, 0x39])
        #expect(p.layout == .v05)
        #expect(p.deviceType == 0xFFFF && p.deviceRevision == 0xFFFF && p.applicationVersion == 0xFFFF_FFFF)
        #expect(p.softdeviceReq == [0x64])
        #expect(p.crc16 == 0x3938)
    }

    @Test func crcOnlyAndMultipleSdReq() throws {
        let crcOnly = try LegacyInitPacket(decoding: [0xA0, 0x98])
        #expect(crcOnly.layout == .crcOnly && crcOnly.crc16 == 0x98A0 && crcOnly.deviceType == nil)
        // 16 bytes = 14 + 2(n-1) with n = 2: device 0x0052, revision 0xADAF, version 1, [0x80, 0x87], crc 0x1234.
        let two = try LegacyInitPacket(decoding: [0x52, 0x00, 0xAF, 0xAD, 0x01, 0, 0, 0, 0x02, 0x00, 0x80, 0, 0x87, 0, 0x34, 0x12])
        #expect(two.softdeviceReq == [0x80, 0x87] && two.crc16 == 0x1234 && two.deviceRevision == 0xADAF)
    }

    @Test func extendedLayouts() throws {
        let header: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 0x01, 0x00, 0xFE, 0xFF]
        let v06 = try LegacyInitPacket(decoding: header + [0, 0, 0, 0, 0x11, 0x22])
        #expect(v06.layout == .v06 && v06.crc16 == 0x2211 && v06.extPacketID == 0)
        let sha = Fixtures.image(32)
        let v07 = try LegacyInitPacket(decoding: header + [1, 0, 0, 0, 0x10, 0, 0, 0] + sha)
        #expect(v07.layout == .v07 && v07.firmwareLength == 16 && v07.sha256 == sha)
        #expect(v07.sha256?.count == 32)
        let signature = Fixtures.image(64, seed: 9)
        let v08bytes = header + [2, 0, 0, 0, 0x10, 0, 0, 0] + sha + signature
        let v08 = try LegacyInitPacket(decoding: v08bytes)
        #expect(v08bytes.count == 116)
        #expect(v08.layout == .v08 && v08.signature == signature && v08.signedBytes == Array(v08bytes.prefix(52)))
    }

    @Test func rejectsOtherLengths() {
        for length in [0, 1, 3, 9, 11, 13, 15, 20, 53, 115] {
            let bytes = [0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 0x01, 0x00] + [UInt8](repeating: 0, count: 200)
            #expect(throws: PackageError.self, "length \(length)") { try LegacyInitPacket(decoding: Array(bytes.prefix(length))) }
        }
        // ext_packet_id 5 does not exist.
        #expect(throws: PackageError.self) {
            try LegacyInitPacket(decoding: [0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 0x01, 0x00, 0xFE, 0xFF, 5, 0, 0, 0, 0, 0])
        }
    }

    @Test func formatIsDecidedFromBytes() throws {
        if case .legacy = try InitPacket(decoding: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00, 0x64, 0x00, 0x38, 0x39]) {
        } else {
            Issue.record("14-byte legacy packet decoded as Secure")
        }
        if case .secure = try InitPacket(decoding: SecureInitPacketTests.appNewDat) {} else { Issue.record("Secure decoded as Legacy") }
    }
}
