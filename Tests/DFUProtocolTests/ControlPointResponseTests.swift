import BLECore
import DFUProtocol
import Testing

struct ResponseVector: Sendable, CustomStringConvertible {
    var bytes: [UInt8]
    var response: ControlPointResponse
    var description: String { bytes.hexString }
}

let responseVectors: [ResponseVector] = [
    // Response to Create: success
    ResponseVector(bytes: [0x60, 0x01, 0x01], response: ControlPointResponse(request: .create, status: .success)),
    // Response to Execute: operation not permitted (0x08)
    ResponseVector(
        bytes: [0x60, 0x04, 0x08],
        response: ControlPointResponse(request: .execute, status: .failure(.operationNotPermitted))),
    // Response to Execute: extended error 0x05 firmware version too low
    ResponseVector(
        bytes: [0x60, 0x04, 0x0B, 0x05],
        response: ControlPointResponse(request: .execute, status: .extended(.firmwareVersionFailure))),
    // Response to Execute: extended error 0x0E firmware already present
    ResponseVector(
        bytes: [0x60, 0x04, 0x0B, 0x0E],
        response: ControlPointResponse(request: .execute, status: .extended(.firmwareAlreadyPresent))),
    // Response to Select: max size 4096, offset 0x2000, CRC 0xDEADBEEF
    ResponseVector(
        bytes: [0x60, 0x06, 0x01, 0x00, 0x10, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0xEF, 0xBE, 0xAD, 0xDE],
        response: .select(maxSize: 4096, offset: 0x2000, crc: 0xDEAD_BEEF)),
    // Response to Calculate Checksum (= PRN): offset 244, CRC 0x12345678
    ResponseVector(
        bytes: [0x60, 0x03, 0x01, 0xF4, 0x00, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12],
        response: .checksum(offset: 244, crc: 0x1234_5678)),
    // Response to Set PRN: invalid parameter (0x03)
    ResponseVector(
        bytes: [0x60, 0x02, 0x03], response: ControlPointResponse(request: .setPRN, status: .failure(.invalidParameter))
    ),
    // Response to unknown opcode 0x05: unknown result 0x42 survives
    ResponseVector(
        bytes: [0x60, 0x05, 0x42],
        response: ControlPointResponse(
            request: DFUOpcode(rawValue: 0x05), status: .failure(DFUResultCode(rawValue: 0x42)))),
    // Extended error with unknown code 0x7F
    ResponseVector(
        bytes: [0x60, 0x01, 0x0B, 0x7F],
        response: ControlPointResponse(request: .create, status: .extended(DFUExtendedError(rawValue: 0x7F)))),
]

@Suite(.timeLimit(.minutes(2))) struct ControlPointResponseTests {
    @Test(arguments: responseVectors)
    func decodes(_ vector: ResponseVector) throws {
        #expect(try ControlPointResponse(decoding: vector.bytes) == vector.response)
    }

    @Test(arguments: responseVectors)
    func encodes(_ vector: ResponseVector) {
        #expect(vector.response.encoded == vector.bytes)
    }

    /// Prefixes shorter than the header (3 bytes, 4 for extended errors) are truncated; longer prefixes decode with a
    /// shorter payload, whose typed accessors then report truncation.
    @Test(arguments: responseVectors)
    func truncatedPrefixes(_ vector: ResponseVector) throws {
        let headerLength = if case .extended = vector.response.status { 4 } else { 3 }
        for length in 0..<vector.bytes.count {
            let prefix = Array(vector.bytes[0..<length])
            if length < headerLength {
                #expect(throws: DFUDecodingError(length == 0 ? .empty : .truncated, "")) {
                    try ControlPointResponse(decoding: prefix)
                }
            } else {
                let decoded = try ControlPointResponse(decoding: prefix)
                #expect(decoded.payload.count == length - headerLength)
                if vector.response.request == .select {
                    #expect(throws: DFUDecodingError(.truncated, "")) { try decoded.selectPayload() }
                }
                if vector.response.request == .calculateChecksum {
                    #expect(throws: DFUDecodingError(.truncated, "")) { try decoded.checksumPayload() }
                }
            }
        }
    }

    @Test func selectPayload() throws {
        // 60 06 01 | max 512 | offset 141 | CRC 0x01020304
        let bytes: [UInt8] = [0x60, 0x06, 0x01, 0x00, 0x02, 0, 0, 0x8D, 0, 0, 0, 0x04, 0x03, 0x02, 0x01]
        let info = try ControlPointResponse(decoding: bytes).selectPayload()
        #expect(info == ObjectInfo(maxSize: 512, offset: 141, crc: 0x0102_0304))
    }

    @Test func packetReceiptIsTheChecksumResponse() throws {
        // PRN after 12 packets of 20 bytes: 60 03 01 | offset 240 | CRC 0xCAFEBABE
        let prn: [UInt8] = [0x60, 0x03, 0x01, 0xF0, 0x00, 0x00, 0x00, 0xBE, 0xBA, 0xFE, 0xCA]
        let decoded = try ControlPointResponse(decoding: prn)
        #expect(decoded == .checksum(offset: 240, crc: 0xCAFE_BABE))
        let payload = try decoded.checksumPayload()
        #expect(payload.offset == 240)
        #expect(payload.crc == 0xCAFE_BABE)
    }

    @Test func wrongMarkerIsMalformed() {
        // 20 01 01 is a buttonless response, not a control point response
        #expect(throws: DFUDecodingError(.malformed, "")) { try ControlPointResponse(decoding: [0x20, 0x01, 0x01]) }
    }

    @Test func descriptionsNameCodes() {
        let ext = ControlPointResponse(request: .execute, status: .extended(.firmwareVersionFailure))
        #expect(ext.description == "Response to Execute (0x04): extended error: firmware version too low (0x05)")
        let unknown = ControlPointResponse(
            request: DFUOpcode(rawValue: 0x05), status: .failure(DFUResultCode(rawValue: 0x42)))
        #expect(unknown.description == "Response to Unknown (0x05): unknown result (0x42)")
        #expect(DFUExtendedError(rawValue: 0x7F).description == "unknown extended error (0x7F)")
        #expect(DFUStatus.failure(.operationNotPermitted).description == "operation not permitted (0x08)")
    }
}
