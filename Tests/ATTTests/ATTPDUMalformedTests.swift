import ATT
import BLECore
import Testing

/// A row of bytes that must not decode, with the code it must fail with and a fragment of the reason.
struct RejectRow: Sendable, CustomStringConvertible {
    var hex: String
    var code: ATTDecodingError.Code
    var reason: String
    var comment: String
    var description: String { comment }

    init(_ hex: String, _ code: ATTDecodingError.Code, _ reason: String, _ comment: String) {
        self.hex = hex
        self.code = code
        self.reason = reason
        self.comment = comment
    }
}

let rejectRows: [RejectRow] = [
    // Find Information Response format octets other than 0x01/0x02.
    RejectRow("05 00 0300 0229", .malformed, "format 0x00", "find information: format 0x00"),
    RejectRow("05 03 0300 0229", .malformed, "format 0x03", "find information: format 0x03"),
    RejectRow("05 FF", .malformed, "format 0xFF", "find information: format 0xFF, no data"),
    // Lists that are not a whole number of entries.
    RejectRow("05 01 0300 0229 04", .malformed, "information data of 5 byte(s)", "find information: 4 + 1 bytes"),
    RejectRow(
        "05 02 0300 0229 0400 0129 0000 0000 0000 0000 0000 0000", .malformed, "not a whole number of 18-byte",
        "find information format 2: 20 bytes"),
    RejectRow("07 1000 1800 20", .malformed, "handles information list of 5 byte(s)", "find by type value: 5 bytes"),
    RejectRow("09 04 0100 AA00 0200", .malformed, "attribute data list of 6 byte(s)", "read by type: 4 + 2 bytes"),
    RejectRow("11 06 0100 0700 0018 0800", .malformed, "not a whole number of 6-byte", "read by group: 6 + 2 bytes"),
    // Length octets that cannot hold the fixed part of an entry.
    RejectRow("09 00 0100", .malformed, "length 0 is less than the 2", "read by type: length 0"),
    RejectRow("09 01 0100", .malformed, "length 1 is less than the 2", "read by type: length 1"),
    RejectRow("11 03 0100 0700", .malformed, "length 3 is less than the 4", "read by group: length 3"),
    RejectRow("11 00", .malformed, "length 0", "read by group: length 0, no list"),
    // A length octet larger than the list: not even one entry.
    RejectRow("09 07 0200 0A03", .truncated, "attribute data list needs 7 byte(s), 4 left", "read by type: short list"),
    RejectRow("11 06 0100 07", .truncated, "attribute data list needs 6 byte(s), 3 left", "read by group: short list"),
    // UUIDs that are neither 2 nor 16 bytes.
    RejectRow("08 0100 FFFF 032800", .malformed, "attribute type of 3 byte(s)", "read by type: 3-byte UUID"),
    RejectRow("08 0100 FFFF 59FE0000", .malformed, "attribute type of 4 byte(s)", "read by type: 32-bit UUID"),
    RejectRow(
        "08 0100 FFFF" + dfuControlPointLE + "00", .malformed, "attribute type of 17 byte(s)",
        "read by type: 17-byte UUID"),
    RejectRow("10 0100 FFFF 002800", .malformed, "attribute group type of 3 byte(s)", "read by group: 3-byte UUID"),
    // Trailing bytes after fixed-size PDUs.
    RejectRow("01 0A 0300 01 00", .malformed, "Error Response: malformed: 1 trailing byte(s)", "error response + 1"),
    RejectRow("02 1700 00", .malformed, "Exchange MTU Request: malformed: 1 trailing", "exchange MTU request + 1"),
    RejectRow("03 1700 0000", .malformed, "Exchange MTU Response: malformed: 2 trailing", "exchange MTU response + 2"),
    RejectRow("04 0100 FFFF 00", .malformed, "Find Information Request: malformed", "find information request + 1"),
    RejectRow("0A 0300 00", .malformed, "Read Request: malformed: 1 trailing", "read request + 1"),
    RejectRow("0C 0300 1600 00", .malformed, "Read Blob Request: malformed: 1 trailing", "read blob request + 1"),
    RejectRow("13 00", .malformed, "Write Response: malformed: 1 trailing", "write response + 1"),
    RejectRow("1E 0102", .malformed, "Handle Value Confirmation: malformed: 2 trailing", "confirmation + 2"),
    // Truncated fixed fields of variable-tail PDUs.
    RejectRow("12 0E", .truncated, "Write Request: truncated: attribute handle", "write request, half a handle"),
    RejectRow("06 0100 FFFF 00", .truncated, "Find By Type Value Request: truncated: attribute type", "find by type"),
    RejectRow("1B", .truncated, "Handle Value Notification: truncated: attribute handle", "notification, no handle"),
]

@Suite("ATT PDU rejection", .timeLimit(.minutes(2)))
struct ATTPDUMalformedTests {
    @Test("malformed and truncated rows fail with the right code and reason", arguments: rejectRows)
    func rejects(_ row: RejectRow) throws {
        let bytes = try #require([UInt8](hexString: row.hex))
        let error = try #require(decodingError(bytes))
        #expect(error.code == row.code, "\(row.comment): \(error)")
        #expect(error.reason.contains(row.reason), "\(row.comment): \(error.reason)")
        #expect(error.description.hasPrefix("ATTDecodingError.\(row.code):"))
    }

    @Test("invalid handle ranges are not a decoding error (the server answers them)")
    func handleRangesAreNotJudged() throws {
        // Find Information Request: start = 0x0010 > end = 0x0001; start = 0x0000.
        #expect(
            try ATTPDU(decoding: [0x04, 0x10, 0x00, 0x01, 0x00])
                == .findInformationRequest(startHandle: 0x10, endHandle: 1))
        #expect(
            try ATTPDU(decoding: [0x04, 0x00, 0x00, 0xFF, 0xFF])
                == .findInformationRequest(startHandle: 0, endHandle: 0xFFFF))
        // Read By Group Type Request: start = 0xFFFF > end = 0x0001, type 2800.
        #expect(
            try ATTPDU(decoding: [0x10, 0xFF, 0xFF, 0x01, 0x00, 0x00, 0x28])
                == .readByGroupTypeRequest(startHandle: 0xFFFF, endHandle: 1, type: BluetoothUUID(0x2800)))
        // Exchange MTU Request: Client Rx MTU = 5 (below the LE minimum of 23): the bearer's business.
        #expect(try ATTPDU(decoding: [0x02, 0x05, 0x00]) == .exchangeMTURequest(clientRxMTU: 5))
    }

    @Test("encoding picks the Find Information format so the PDU is always valid")
    func findInformationFormat() throws {
        let short = ATTPDU.findInformationResponse([ATTHandleUUID(handle: 1, uuid: BluetoothUUID(0x2800))])
        #expect(short.encoded == [0x05, 0x01, 0x01, 0x00, 0x00, 0x28])
        // Mixed widths: format 0x02 with every UUID written in 128-bit form; decodes back to equal UUIDs.
        let mixed = ATTPDU.findInformationResponse([
            ATTHandleUUID(handle: 1, uuid: BluetoothUUID(0x2800)), ATTHandleUUID(handle: 2, uuid: dfuControlPoint),
        ])
        let bytes = mixed.encoded
        #expect(bytes.count == 2 + 2 * 18)
        #expect(bytes[1] == 0x02)
        #expect(Array(bytes[4..<20]) == BluetoothUUID(0x2800).littleEndian128)
        #expect(try ATTPDU(decoding: bytes) == mixed)
        // A format 0x02 list of 16-bit aliases decodes to equal UUIDs (and re-encodes as format 0x01).
        let aliased: [UInt8] = [0x05, 0x02, 0x01, 0x00] + BluetoothUUID(0x2800).littleEndian128
        #expect(try ATTPDU(decoding: aliased) == short)
    }

    @Test("a 32-bit UUID goes out as 128-bit in Read By Type Request")
    func uuid32() throws {
        let uuid = BluetoothUUID(uuid32: 0x1234_5678)
        let pdu = ATTPDU.readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: uuid)
        #expect(pdu.encoded.count == 5 + 16)
        #expect(try ATTPDU(decoding: pdu.encoded) == pdu)
    }

    @Test("an empty list encodes but does not decode")
    func emptyLists() {
        #expect(ATTPDU.findInformationResponse([]).encoded == [0x05, 0x01])
        #expect(ATTPDU.readByTypeResponse([]).encoded == [0x09, 0x02])
        #expect(ATTPDU.readByGroupTypeResponse([]).encoded == [0x11, 0x04])
        #expect(ATTPDU.findByTypeValueResponse([]).encoded == [0x07])
        for pdu in [
            ATTPDU.findInformationResponse([]), .readByTypeResponse([]), .readByGroupTypeResponse([]),
            .findByTypeValueResponse([]),
        ] {
            #expect(decodingError(pdu.encoded)?.code == .truncated, "\(pdu)")
        }
    }
}
