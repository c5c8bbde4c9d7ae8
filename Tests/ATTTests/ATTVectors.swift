import ATT
import BLECore

/// What a shorter prefix of a vector must decode to (the empty prefix is always `.empty`).
enum PrefixRule: Sendable {
    /// Every shorter prefix is truncated.
    case fixed
    /// Prefixes of at least `from` bytes are themselves valid PDUs (a variable-length tail); shorter ones are
    /// truncated.
    case tail(from: Int)
    /// A list of `entry`-byte entries after `header` bytes (opcode included): less than one entry is truncated,
    /// whole entries decode, a partial last entry is malformed.
    case list(header: Int, entry: Int)
    /// A UUID tail starting at byte `at`: fewer than 2 UUID bytes truncated, exactly 2 a valid 16-bit UUID PDU,
    /// 3 to 15 malformed.
    case uuidTail(at: Int)

    enum Outcome: Equatable { case decodes, truncated, malformed }

    func outcome(prefixLength k: Int) -> Outcome {
        switch self {
        case .fixed:
            return .truncated
        case .tail(let from):
            return k >= from ? .decodes : .truncated
        case .list(let header, let entry):
            if k < header + entry { return .truncated }
            return (k - header) % entry == 0 ? .decodes : .malformed
        case .uuidTail(let at):
            if k < at + 2 { return .truncated }
            return k == at + 2 ? .decodes : .malformed
        }
    }
}

struct Vector: Sendable, CustomStringConvertible {
    var name: String
    var bytes: [UInt8]
    var pdu: ATTPDU
    var prefixes: PrefixRule

    init(_ name: String, _ hex: String, _ pdu: ATTPDU, _ prefixes: PrefixRule) {
        self.name = name
        self.bytes = [UInt8](hexString: hex) ?? []
        self.pdu = pdu
        self.prefixes = prefixes
    }

    var description: String { name }
}

/// 8EC90001-F315-4F60-9FB8-838830DAEA50 (Nordic Secure DFU Control Point), least significant byte first.
let dfuControlPointLE = "50EADA308883B89F604F15F30100C98E"
let dfuControlPoint = BluetoothUUID("8EC90001-F315-4F60-9FB8-838830DAEA50") ?? BluetoothUUID(0)

/// One vector per PDU case, plus edge shapes (empty values, 128-bit UUIDs, unknown opcodes).
let vectors: [Vector] = [
    // Error Response: request = Read Request (0x0A), handle = 0x0003, error = Invalid Handle (0x01).
    Vector(
        "errorResponse", "01 0A 0300 01", .errorResponse(requestOpcode: .readRequest, handle: 3, error: .invalidHandle),
        .fixed),
    // Error Response: request = Write Request (0x12), handle = 0x000E, error = application error 0x80.
    Vector(
        "errorResponse.app", "01 12 0E00 80",
        .errorResponse(requestOpcode: .writeRequest, handle: 0x0E, error: ATTErrorCode(0x80)), .fixed),
    // Exchange MTU Request: Client Rx MTU = 517.
    Vector("exchangeMTURequest", "02 0502", .exchangeMTURequest(clientRxMTU: 517), .fixed),
    // Exchange MTU Response: Server Rx MTU = 247.
    Vector("exchangeMTUResponse", "03 F700", .exchangeMTUResponse(serverRxMTU: 247), .fixed),
    // Find Information Request: start = 0x0001, end = 0xFFFF.
    Vector(
        "findInformationRequest", "04 0100 FFFF", .findInformationRequest(startHandle: 1, endHandle: 0xFFFF), .fixed),
    // Find Information Response, format 0x01: (0x0003, 2902), (0x0004, 2901).
    Vector(
        "findInformationResponse.16", "05 01 0300 0229 0400 0129",
        .findInformationResponse([
            ATTHandleUUID(handle: 3, uuid: BluetoothUUID(0x2902)),
            ATTHandleUUID(handle: 4, uuid: BluetoothUUID(0x2901)),
        ]),
        .list(header: 2, entry: 4)),
    // Find Information Response, format 0x02: (0x0010, 8EC90001-F315-4F60-9FB8-838830DAEA50).
    Vector(
        "findInformationResponse.128", "05 02 1000" + dfuControlPointLE,
        .findInformationResponse([ATTHandleUUID(handle: 0x10, uuid: dfuControlPoint)]), .list(header: 2, entry: 18)),
    // Find By Type Value Request: start = 0x0001, end = 0xFFFF, type = 2800 (Primary Service), value = 59 FE.
    Vector(
        "findByTypeValueRequest", "06 0100 FFFF 0028 59FE",
        .findByTypeValueRequest(startHandle: 1, endHandle: 0xFFFF, type: 0x2800, value: [0x59, 0xFE]), .tail(from: 7)),
    // Find By Type Value Response: 0x0010-0x0018, 0x0020-0xFFFF.
    Vector(
        "findByTypeValueResponse", "07 1000 1800 2000 FFFF",
        .findByTypeValueResponse([ATTHandleRange(start: 0x10, end: 0x18), ATTHandleRange(start: 0x20, end: 0xFFFF)]),
        .list(header: 1, entry: 4)),
    // Read By Type Request: start = 0x0001, end = 0xFFFF, type = 2803 (Characteristic).
    Vector(
        "readByTypeRequest.16", "08 0100 FFFF 0328",
        .readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: BluetoothUUID(0x2803)), .fixed),
    // Read By Type Request: start = 0x000A, end = 0x0020, type = 8EC90001-… (128-bit).
    Vector(
        "readByTypeRequest.128", "08 0A00 2000" + dfuControlPointLE,
        .readByTypeRequest(startHandle: 0x0A, endHandle: 0x20, type: dfuControlPoint), .uuidTail(at: 5)),
    // Read By Type Response, length 7: (0x0002: props 0A, value handle 0x0003, 2A00), (0x0004: 02, 0x0005, 2A01).
    Vector(
        "readByTypeResponse", "09 07 0200 0A0300002A 0400 020500012A",
        .readByTypeResponse([
            ATTHandleValue(handle: 2, value: [0x0A, 0x03, 0x00, 0x00, 0x2A]),
            ATTHandleValue(handle: 4, value: [0x02, 0x05, 0x00, 0x01, 0x2A]),
        ]),
        .list(header: 2, entry: 7)),
    // Read By Type Response, length 2 (empty values): 0x0003, 0x0005.
    Vector(
        "readByTypeResponse.emptyValues", "09 02 0300 0500",
        .readByTypeResponse([ATTHandleValue(handle: 3, value: []), ATTHandleValue(handle: 5, value: [])]),
        .list(header: 2, entry: 2)),
    // Read Request: handle = 0x0003.
    Vector("readRequest", "0A 0300", .readRequest(handle: 3), .fixed),
    // Read Response: value = "DFU".
    Vector("readResponse", "0B 444655", .readResponse(value: [0x44, 0x46, 0x55]), .tail(from: 1)),
    // Read Response: empty value.
    Vector("readResponse.empty", "0B", .readResponse(value: []), .fixed),
    // Read Blob Request: handle = 0x0003, offset = 22.
    Vector("readBlobRequest", "0C 0300 1600", .readBlobRequest(handle: 3, offset: 22), .fixed),
    // Read Blob Response: part value = 01 02 03.
    Vector("readBlobResponse", "0D 010203", .readBlobResponse(value: [1, 2, 3]), .tail(from: 1)),
    // Read By Group Type Request: start = 0x0001, end = 0xFFFF, type = 2800 (Primary Service).
    Vector(
        "readByGroupTypeRequest", "10 0100 FFFF 0028",
        .readByGroupTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: BluetoothUUID(0x2800)), .fixed),
    // Read By Group Type Request: start = 0x0001, end = 0x00FF, type = 8EC90001-… (128-bit).
    Vector(
        "readByGroupTypeRequest.128", "10 0100 FF00" + dfuControlPointLE,
        .readByGroupTypeRequest(startHandle: 1, endHandle: 0xFF, type: dfuControlPoint), .uuidTail(at: 5)),
    // Read By Group Type Response, length 6: (0x0001-0x0007: 1800), (0x0008-0x000B: 1801).
    Vector(
        "readByGroupTypeResponse", "11 06 0100 0700 0018 0800 0B00 0118",
        .readByGroupTypeResponse([
            ATTGroupValue(handle: 1, endGroupHandle: 7, value: [0x00, 0x18]),
            ATTGroupValue(handle: 8, endGroupHandle: 0x0B, value: [0x01, 0x18]),
        ]),
        .list(header: 2, entry: 6)),
    // Read By Group Type Response, length 20: (0x000C-0xFFFF: 8EC90001-… as the service UUID).
    Vector(
        "readByGroupTypeResponse.128", "11 14 0C00 FFFF" + dfuControlPointLE,
        .readByGroupTypeResponse([
            ATTGroupValue(handle: 0x0C, endGroupHandle: 0xFFFF, value: [UInt8](hexString: dfuControlPointLE) ?? [])
        ]),
        .list(header: 2, entry: 20)),
    // Write Request: handle = 0x000E, value = 01 00 (enable notifications).
    Vector("writeRequest", "12 0E00 0100", .writeRequest(handle: 0x0E, value: [1, 0]), .tail(from: 3)),
    // Write Request: handle = 0x000E, empty value.
    Vector("writeRequest.empty", "12 0E00", .writeRequest(handle: 0x0E, value: []), .fixed),
    // Write Response.
    Vector("writeResponse", "13", .writeResponse, .fixed),
    // Write Command: handle = 0x0010, value = 01 02 03 04.
    Vector("writeCommand", "52 1000 01020304", .writeCommand(handle: 0x10, value: [1, 2, 3, 4]), .tail(from: 3)),
    // Handle Value Notification: handle = 0x000E, value = 60 01 01 (DFU response: Create, Success).
    Vector(
        "handleValueNotification", "1B 0E00 600101", .handleValueNotification(handle: 0x0E, value: [0x60, 0x01, 0x01]),
        .tail(from: 3)),
    // Handle Value Indication: handle = 0x0012, value = 02.
    Vector("handleValueIndication", "1D 1200 02", .handleValueIndication(handle: 0x12, value: [0x02]), .tail(from: 3)),
    // Handle Value Confirmation.
    Vector("handleValueConfirmation", "1E", .handleValueConfirmation, .fixed),
    // Prepare Write Request (not modelled): handle 0x000E, offset 0, value 01 02.
    Vector(
        "unknown.prepareWrite", "16 0E00 0000 0102",
        .unknown(opcode: .prepareWriteRequest, parameters: [0x0E, 0, 0, 0, 1, 2]), .tail(from: 1)),
    // Execute Write Request (not modelled): flags = 01.
    Vector("unknown.executeWrite", "18 01", .unknown(opcode: .executeWriteRequest, parameters: [1]), .tail(from: 1)),
    // Signed Write Command (not modelled): handle 0x0010, value AA, 12-byte signature.
    Vector(
        "unknown.signedWrite", "D2 1000 AA 000102030405060708090A0B",
        .unknown(opcode: .signedWriteCommand, parameters: [0x10, 0x00, 0xAA] + Array(0...11)), .tail(from: 1)),
    // Unassigned opcode 0x40 (a command by its flag) with parameter AB.
    Vector("unknown.0x40", "40 AB", .unknown(opcode: ATTOpcode(0x40), parameters: [0xAB]), .tail(from: 1)),
    // Unassigned opcode 0xFF, no parameters.
    Vector("unknown.0xFF", "FF", .unknown(opcode: ATTOpcode(0xFF), parameters: []), .fixed),
]

/// Decodes, returning the error (nil on success).
func decodingError(_ bytes: [UInt8]) -> ATTDecodingError? {
    do throws(ATTDecodingError) {
        _ = try ATTPDU(decoding: bytes)
        return nil
    } catch {
        return error
    }
}

/// Decodes, returning the PDU (nil on failure).
func decoded(_ bytes: [UInt8]) -> ATTPDU? {
    try? ATTPDU(decoding: bytes)
}
