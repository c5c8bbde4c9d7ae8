import BLECore
import CBOR
import MCUmgr
import Testing

struct SMPMessageVector: Sendable, CustomStringConvertible {
    var hex: String
    var message: SMPMessage
    var description: String { hex }
    var bytes: [UInt8] { [UInt8](hexString: hex) ?? [] }
}

/// SMP messages byte for byte (header fields in the comment: op ver flags len group seq id, then the body).
let smpMessageVectors: [SMPMessageVector] = [
    // read v2, len 1, group 1 (image), seq 0x42, id 0 (state) + {} (Android-nRF-Connect #251 log)
    SMPMessageVector(hex: "08 00 0001 0001 42 00 a0", message: SMPMessage(.read, group: .image, command: 0, sequence: 0x42)),
    // write v1, len 10, group 0 (os), seq 1, id 0 (echo) + {"d": "hello"}
    SMPMessageVector(
        hex: "02 00 0009 0000 01 00 a1 61 64 65 68656c6c6f",
        message: SMPMessage(.write, group: .os, command: 0, sequence: 1, version: .v1, body: .textMap(["d": .text("hello")]))),
    // write-response v2, len 9, group 1, seq 7, id 1 (upload) + {"off": 4096}
    SMPMessageVector(
        hex: "0b 00 0008 0001 07 01 a1 636f6666 191000",
        message: SMPMessage(.writeResponse, group: .image, command: 1, sequence: 7, body: .textMap(["off": .unsigned(4096)]))),
    // read-response v2, group 0, seq 255, id 6 (params) + {"buf_size": 2475, "buf_count": 4}
    SMPMessageVector(
        hex: "09 00 0018 0000 ff 06 a2 686275665f73697a65 1909ab 696275665f636f756e74 04",
        message: SMPMessage(
            .readResponse, group: .os, command: 6, sequence: 255,
            body: .textMap(["buf_size": .unsigned(2475), "buf_count": .unsigned(4)]))),
    // write-response v2, group 1, seq 3, id 1 + {"err": {"group": 1, "rc": 27}}: CURRENT_VERSION_IS_NEWER
    SMPMessageVector(
        hex: "0b 00 0012 0001 03 01 a1 63657272 a2 6567726f7570 01 627263 181b",
        message: SMPMessage(
            .writeResponse, group: .image, command: 1, sequence: 3,
            body: .textMap(["err": .textMap(["group": .unsigned(1), "rc": .unsigned(27)])]))),
    // write v2, group 0, seq 9, id 5 (reset), no body (length 0)
    SMPMessageVector(hex: "0a 00 0000 0000 09 05", message: SMPMessage(.write, group: .os, command: 5, sequence: 9, body: nil)),
    // reserved bits 101, op 6 (unknown), ver 3 (reserved), flags 0x80, group 64 (user): all survive
    SMPMessageVector(
        hex: "be 80 0001 0040 00 7f a0",
        message: SMPMessage(
            header: SMPHeader(
                operation: SMPOperation(rawValue: 6), version: SMPVersion(rawValue: 3), flags: 0x80, length: 1,
                group: SMPGroup(rawValue: 64), sequence: 0, command: 0x7F, reserved: 5),
            body: .map([]))),
]

@Suite(.timeLimit(.minutes(2))) struct SMPHeaderTests {
    @Test(arguments: smpMessageVectors)
    func decodes(_ vector: SMPMessageVector) throws {
        var expected = vector.message
        expected.header.length = UInt16(vector.bytes.count - 8)
        #expect(try SMPMessage(decoding: vector.bytes) == expected)
    }

    @Test(arguments: smpMessageVectors)
    func encodes(_ vector: SMPMessageVector) {
        #expect(vector.message.encoded() == vector.bytes)
    }

    @Test(arguments: smpMessageVectors)
    func everyTruncatedPrefixIsTruncated(_ vector: SMPMessageVector) {
        for length in 0..<vector.bytes.count {
            #expect(throws: SMPDecodingError(.truncated, ""), "prefix \(length)") {
                _ = try SMPMessage(decoding: Array(vector.bytes.prefix(length)))
            }
        }
        #expect(throws: SMPDecodingError(.trailingBytes, "")) { _ = try SMPMessage(decoding: vector.bytes + [0]) }
    }

    @Test func headerFieldsAreBigEndian() throws {
        // op 3, ver 1 | flags 0 | len 0x0102 | group 0x0304 | seq 5 | id 6
        let header = try SMPHeader(decoding: [0x0B, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06][...])
        #expect(header.operation == .writeResponse)
        #expect(header.version == .v2)
        #expect(header.length == 0x0102)
        #expect(header.group.rawValue == 0x0304)
        #expect(header.sequence == 5)
        #expect(header.command == 6)
        #expect(header.encoded == [0x0B, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06])
    }

    @Test func malformedBodiesAreRefused() {
        // Body declared 2 bytes: a CBOR map that needs 3 (malformed, not truncated: the length bounds the body).
        #expect(throws: SMPDecodingError(.malformed, "")) { _ = try SMPMessage(decoding: [0x0B, 0, 0, 2, 0, 1, 0, 1, 0xA1, 0x61]) }
        // Body is an array, not a map.
        #expect(throws: SMPDecodingError(.malformed, "")) { _ = try SMPMessage(decoding: [0x0B, 0, 0, 1, 0, 1, 0, 1, 0x80]) }
        // Reserved additional information.
        #expect(throws: SMPDecodingError(.malformed, "")) { _ = try SMPMessage(decoding: [0x0B, 0, 0, 1, 0, 1, 0, 1, 0x1C]) }
    }

    @Test func indefiniteZephyrBodiesDecode() throws {
        // zcbor without CONFIG_ZCBOR_CANONICAL: {_ "off": 0}
        let message = try SMPMessage(decoding: [0x0B, 0, 0, 7, 0, 1, 0, 1, 0xBF, 0x63, 0x6F, 0x66, 0x66, 0x00, 0xFF])
        #expect(message.body?["off"]?.intValue == 0)
    }

    @Test func statusReadsBothErrorForms() {
        #expect(SMPStatus(body: .textMap(["off": .unsigned(0)])) == .ok)
        #expect(SMPStatus(body: .textMap(["rc": .unsigned(0), "off": .unsigned(5)])) == .ok)  // older servers
        #expect(SMPStatus(body: .textMap(["rc": .unsigned(8)])) == .failed(.notSupported, reason: nil))
        #expect(
            SMPStatus(body: .textMap(["rc": .unsigned(3), "rsn": .text("bad")])) == .failed(.invalidValue, reason: "bad"))
        #expect(
            SMPStatus(body: .textMap(["err": .textMap(["group": .unsigned(1), "rc": .unsigned(9)])]))
                == .groupFailed(SMPGroupError(.noFreeSlot)))
        #expect(SMPStatus(body: .textMap(["err": .textMap(["group": .unsigned(1), "rc": .unsigned(0)])])) == .ok)
        #expect(SMPReturnCode.notSupported.description == "MGMT_ERR_ENOTSUP (8)")
        #expect(SMPGroupError(.currentVersionIsNewer).description == "IMG_MGMT_ERR_CURRENT_VERSION_IS_NEWER (27)")
        #expect(ImageManagementCode.currentVersionIsNewer.smpV1Code == .badState)
        #expect(ImageManagementCode(rawValue: 99).description == "IMG_MGMT_ERR_99 (99)")
    }

    @Test func reassemblerJoinsNotificationsByLength() throws {
        let a = SMPMessage(.writeResponse, group: .image, command: 1, sequence: 1, body: .textMap(["off": .unsigned(4096)])).encoded()
        let b = SMPMessage(.readResponse, group: .os, command: 6, sequence: 2, body: .textMap(["buf_size": .unsigned(2475)])).encoded()
        let stream = a + b
        for split in 1..<stream.count {
            var reassembler = SMPReassembler()
            var frames = reassembler.append(Array(stream.prefix(split)))
            frames += reassembler.append(Array(stream.dropFirst(split)))
            #expect(frames == [a, b], "split at \(split)")
            #expect(reassembler.pendingCount == 0)
        }
    }
}
