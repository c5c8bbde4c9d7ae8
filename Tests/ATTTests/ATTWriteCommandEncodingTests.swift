import Testing

@testable import ATT

/// `ATTPDU.encodeWriteCommand(handle:value:)`, the per-packet encoder, against the general codec.
@Suite(.timeLimit(.minutes(2))) struct ATTWriteCommandEncodingTests {
    @Test func itEncodesLikeTheCodec() throws {
        let image = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        // Slices that start at 0 and elsewhere, empty, one octet, a full 244-octet packet.
        for range in [0..<0, 0..<1, 0..<244, 244..<488, 590..<600, 17..<18] {
            let direct = ATTPDU.encodeWriteCommand(handle: 0x1234, value: image[range])
            #expect(direct == ATTPDU.writeCommand(handle: 0x1234, value: Array(image[range])).encoded)
            // 52 | 34 12 | value
            #expect(Array(direct.prefix(3)) == [0x52, 0x34, 0x12])
            #expect(try ATTPDU(decoding: direct) == .writeCommand(handle: 0x1234, value: Array(image[range])))
        }
    }

    @Test func valuePDUsAreEncodedWithoutGrowing() {
        // The capacity hint is exact for single-value PDUs: the buffer holds exactly the encoding.
        let value = [UInt8](repeating: 0xA5, count: 244)
        for pdu in [
            ATTPDU.writeCommand(handle: 0x10, value: value), .writeRequest(handle: 0x10, value: value),
            .handleValueNotification(handle: 0x0E, value: value), .readResponse(value: value),
        ] {
            let encoded = pdu.encoded
            #expect(encoded.count == (pdu.opcode == .readResponse ? 245 : 247))
            #expect(encoded.capacity < 2 * encoded.count)
        }
    }
}
