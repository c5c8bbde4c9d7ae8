import BLECore

extension ATTPDU {
    /// Decodes one whole PDU (opcode and parameters) as received in one L2CAP frame.
    ///
    /// - Throws: ``ATTDecodingError`` with code `.empty` for no bytes, `.truncated` when a field runs past the end
    ///   (the reason names the PDU and the field), `.malformed` for bytes that break the layout (see the case
    ///   docs in ``ATTPDU``).
    public init(decoding bytes: [UInt8]) throws(ATTDecodingError) {
        try self.init(decoding: bytes[...])
    }

    /// Decodes one whole PDU from a slice (indices need not start at zero).
    public init(decoding bytes: ArraySlice<UInt8>) throws(ATTDecodingError) {
        guard let first = bytes.first else { throw .empty() }
        let opcode = ATTOpcode(first)
        var reader = ParameterReader(opcode: opcode, bytes: bytes.dropFirst())
        self = try Self.decodeParameters(of: opcode, from: &reader)
        try reader.expectEnd()
    }

    private static func decodeParameters(
        of opcode: ATTOpcode, from reader: inout ParameterReader
    ) throws(ATTDecodingError) -> ATTPDU {
        switch opcode {
        case .errorResponse:
            return .errorResponse(
                requestOpcode: ATTOpcode(try reader.uint8("request opcode in error")),
                handle: try reader.uint16("attribute handle in error"),
                error: ATTErrorCode(try reader.uint8("error code")))
        case .exchangeMTURequest:
            return .exchangeMTURequest(clientRxMTU: try reader.uint16("client rx mtu"))
        case .exchangeMTUResponse:
            return .exchangeMTUResponse(serverRxMTU: try reader.uint16("server rx mtu"))
        case .findInformationRequest:
            return .findInformationRequest(
                startHandle: try reader.uint16("starting handle"), endHandle: try reader.uint16("ending handle"))
        case .findInformationResponse:
            return .findInformationResponse(try decodeInformationData(from: &reader))
        case .findByTypeValueRequest:
            return .findByTypeValueRequest(
                startHandle: try reader.uint16("starting handle"), endHandle: try reader.uint16("ending handle"),
                type: try reader.uint16("attribute type"), value: reader.remaining())
        case .findByTypeValueResponse:
            return .findByTypeValueResponse(
                try reader.entries(size: 4, "handles information list") { entry throws(ATTDecodingError) in
                    ATTHandleRange(
                        start: try entry.uint16("found attribute handle"), end: try entry.uint16("group end handle"))
                })
        case .readByTypeRequest:
            return .readByTypeRequest(
                startHandle: try reader.uint16("starting handle"), endHandle: try reader.uint16("ending handle"),
                type: try reader.uuid("attribute type"))
        case .readByTypeResponse:
            let length = try reader.entryLength(minimum: 2, "attribute handle")
            return .readByTypeResponse(
                try reader.entries(size: length, "attribute data list") { entry throws(ATTDecodingError) in
                    ATTHandleValue(handle: try entry.uint16("attribute handle"), value: entry.remaining())
                })
        case .readRequest:
            return .readRequest(handle: try reader.uint16("attribute handle"))
        case .readResponse:
            return .readResponse(value: reader.remaining())
        case .readBlobRequest:
            return .readBlobRequest(
                handle: try reader.uint16("attribute handle"), offset: try reader.uint16("value offset"))
        case .readBlobResponse:
            return .readBlobResponse(value: reader.remaining())
        case .readByGroupTypeRequest:
            return .readByGroupTypeRequest(
                startHandle: try reader.uint16("starting handle"), endHandle: try reader.uint16("ending handle"),
                type: try reader.uuid("attribute group type"))
        case .readByGroupTypeResponse:
            let length = try reader.entryLength(minimum: 4, "attribute handle and end group handle")
            return .readByGroupTypeResponse(
                try reader.entries(size: length, "attribute data list") { entry throws(ATTDecodingError) in
                    ATTGroupValue(
                        handle: try entry.uint16("attribute handle"),
                        endGroupHandle: try entry.uint16("end group handle"), value: entry.remaining())
                })
        case .writeRequest:
            return .writeRequest(handle: try reader.uint16("attribute handle"), value: reader.remaining())
        case .writeResponse:
            return .writeResponse
        case .writeCommand:
            return .writeCommand(handle: try reader.uint16("attribute handle"), value: reader.remaining())
        case .handleValueNotification:
            return .handleValueNotification(handle: try reader.uint16("attribute handle"), value: reader.remaining())
        case .handleValueIndication:
            return .handleValueIndication(handle: try reader.uint16("attribute handle"), value: reader.remaining())
        case .handleValueConfirmation:
            return .handleValueConfirmation
        default:
            return .unknown(opcode: opcode, parameters: reader.remaining())
        }
    }

    /// Format (1) | Information Data: 0x01 = 16-bit UUIDs (4-octet entries), 0x02 = 128-bit (18-octet entries).
    private static func decodeInformationData(
        from reader: inout ParameterReader
    ) throws(ATTDecodingError) -> [ATTHandleUUID] {
        let format = try reader.uint8("format")
        let uuidSize: Int
        switch format {
        case 0x01: uuidSize = 2
        case 0x02: uuidSize = 16
        default: throw reader.malformed("format \(hex2(format)) is neither 0x01 (16-bit UUIDs) nor 0x02 (128-bit)")
        }
        return try reader.entries(size: 2 + uuidSize, "information data") { entry throws(ATTDecodingError) in
            ATTHandleUUID(handle: try entry.uint16("handle"), uuid: try entry.uuid("attribute type"))
        }
    }
}

/// A ``ByteReader`` over the parameters of one PDU that reports errors as ``ATTDecodingError`` naming that PDU.
struct ParameterReader {
    let opcode: ATTOpcode
    private var reader: ByteReader

    init(opcode: ATTOpcode, bytes: ArraySlice<UInt8>) {
        self.opcode = opcode
        self.reader = ByteReader(bytes)
    }

    var remainingCount: Int { reader.remainingCount }

    mutating func uint8(_ field: String) throws(ATTDecodingError) -> UInt8 {
        do throws(ByteReader.Truncated) {
            return try reader.readUInt8(field)
        } catch {
            throw .truncated(opcode, error)
        }
    }

    mutating func uint16(_ field: String) throws(ATTDecodingError) -> UInt16 {
        do throws(ByteReader.Truncated) {
            return try reader.readUInt16(field)
        } catch {
            throw .truncated(opcode, error)
        }
    }

    /// Everything left: the variable-length tail of a PDU (possibly empty).
    mutating func remaining() -> [UInt8] { reader.readRemaining() }

    /// The rest of the parameters as an ATT UUID: 2 octets (16-bit) or 16 (128-bit), least significant first
    /// (§3.2.1). Fewer than 2 octets is truncated; any other count is malformed.
    mutating func uuid(_ field: String) throws(ATTDecodingError) -> BluetoothUUID {
        let count = remainingCount
        guard count >= 2 else {
            throw .truncated(opcode, field: field, needed: 2, available: count)
        }
        guard count == 2 || count == 16, let uuid = BluetoothUUID(littleEndianBytes: remaining()) else {
            throw malformed("\(field) of \(count) byte(s) is neither a 16-bit (2) nor a 128-bit (16) UUID")
        }
        return uuid
    }

    /// The Length octet of a Read By Type / Read By Group Type Response: the size of each list entry, which must
    /// hold at least the fixed part (`minimum` octets, named by `fixedPart`).
    mutating func entryLength(minimum: Int, _ fixedPart: String) throws(ATTDecodingError) -> Int {
        let length = Int(try uint8("length"))
        guard length >= minimum else {
            throw malformed("length \(length) is less than the \(minimum) byte(s) of the \(fixedPart)")
        }
        return length
    }

    /// Reads the rest of the parameters as a non-empty list of `size`-octet entries, each decoded by `decode` from
    /// a reader that must be used up. Less than one entry is truncated; a partial last entry is malformed.
    mutating func entries<Entry>(
        size: Int, _ field: String, _ decode: (inout ParameterReader) throws(ATTDecodingError) -> Entry
    ) throws(ATTDecodingError) -> [Entry] {
        let count = remainingCount
        guard count >= size else {
            throw .truncated(opcode, field: field, needed: size, available: count)
        }
        guard count % size == 0 else {
            throw malformed("\(field) of \(count) byte(s) is not a whole number of \(size)-byte entries")
        }
        let bytes = remaining()
        var list: [Entry] = []
        list.reserveCapacity(count / size)
        var start = 0
        while start < bytes.count {
            var entry = ParameterReader(opcode: opcode, bytes: bytes[start..<start + size])
            list.append(try decode(&entry))
            try entry.expectEnd()
            start += size
        }
        return list
    }

    func malformed(_ detail: String, file: String = #fileID, line: UInt = #line) -> ATTDecodingError {
        .malformed(opcode, detail, file: file, line: line)
    }

    /// Fixed-size PDUs (and list entries) must end exactly where their layout ends.
    func expectEnd() throws(ATTDecodingError) {
        guard reader.isAtEnd else {
            throw malformed("\(remainingCount) trailing byte(s) after the last field")
        }
    }
}
