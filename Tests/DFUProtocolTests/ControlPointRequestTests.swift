import BLECore
import DFUProtocol
import Testing

/// One request vector: the bytes on the wire and the decoded value.
struct RequestVector: Sendable, CustomStringConvertible {
    var bytes: [UInt8]
    var request: ControlPointRequest
    var description: String { bytes.hexString }
}

let requestVectors: [RequestVector] = [
    // Protocol Version
    RequestVector(bytes: [0x00], request: .protocolVersion),
    // Create, type command (0x01), size 0x8D = 141
    RequestVector(bytes: [0x01, 0x01, 0x8D, 0x00, 0x00, 0x00], request: .create(type: .command, size: 141)),
    // Create, type data (0x02), size 0x1000 = 4096
    RequestVector(bytes: [0x01, 0x02, 0x00, 0x10, 0x00, 0x00], request: .create(type: .data, size: 4096)),
    // Set PRN 12
    RequestVector(bytes: [0x02, 0x0C, 0x00], request: .setPRN(12)),
    // Set PRN 0 (off)
    RequestVector(bytes: [0x02, 0x00, 0x00], request: .setPRN(0)),
    // Calculate Checksum
    RequestVector(bytes: [0x03], request: .calculateChecksum),
    // Execute
    RequestVector(bytes: [0x04], request: .execute),
    // Select command
    RequestVector(bytes: [0x06, 0x01], request: .select(.command)),
    // Select data
    RequestVector(bytes: [0x06, 0x02], request: .select(.data)),
    // Get MTU
    RequestVector(bytes: [0x07], request: .getMTU),
    // Write 3 bytes AA BB CC
    RequestVector(bytes: [0x08, 0xAA, 0xBB, 0xCC], request: .write([0xAA, 0xBB, 0xCC])),
    // Ping id 0x42
    RequestVector(bytes: [0x09, 0x42], request: .ping(0x42)),
    // Hardware Version
    RequestVector(bytes: [0x0A], request: .hardwareVersion),
    // Firmware Version of image 1
    RequestVector(bytes: [0x0B, 0x01], request: .firmwareVersion(image: 1)),
    // Abort
    RequestVector(bytes: [0x0C], request: .abort),
    // Unknown opcode 0x05 with parameters 01 02
    RequestVector(
        bytes: [0x05, 0x01, 0x02], request: .unknown(opcode: DFUOpcode(rawValue: 0x05), parameters: [0x01, 0x02])),
    // Unknown type 0x07 in Select survives
    RequestVector(bytes: [0x06, 0x07], request: .select(DFUObjectType(rawValue: 0x07))),
]

@Suite(.timeLimit(.minutes(2))) struct ControlPointRequestTests {
    @Test(arguments: requestVectors)
    func decodes(_ vector: RequestVector) throws {
        #expect(try ControlPointRequest(decoding: vector.bytes) == vector.request)
    }

    @Test(arguments: requestVectors)
    func encodes(_ vector: RequestVector) {
        #expect(vector.request.encoded == vector.bytes)
    }

    /// Every proper prefix that cuts a fixed field is truncated (not malformed); the empty input is `.empty`.
    @Test(arguments: requestVectors)
    func truncatedPrefixes(_ vector: RequestVector) {
        for length in 0..<vector.bytes.count {
            let prefix = Array(vector.bytes[0..<length])
            let result = Result { () throws(DFUDecodingError) in try ControlPointRequest(decoding: prefix) }
            switch result {
            case .success(let decoded):
                // Only variable-length requests (write, unknown) may decode from a prefix, and then differently.
                #expect(decoded != vector.request, "prefix \(prefix.hexString) decoded to the full request")
                #expect([DFUOpcode.write, DFUOpcode(rawValue: 0x05)].contains(decoded.opcode))
            case .failure(let error):
                #expect(error.code == (length == 0 ? .empty : .truncated), "prefix \(prefix.hexString): \(error)")
            }
        }
    }

    @Test func trailingBytesAreMalformed() {
        // Execute followed by a stray byte
        #expect(throws: DFUDecodingError(.malformed, "")) { try ControlPointRequest(decoding: [0x04, 0x00]) }
        // Set PRN 12 with an extra byte
        #expect(throws: DFUDecodingError(.malformed, "")) {
            try ControlPointRequest(decoding: [0x02, 0x0C, 0x00, 0x01])
        }
    }

    @Test func descriptions() {
        #expect(ControlPointRequest.create(type: .data, size: 4096).description == "Create data object, size 4096")
        #expect(ControlPointRequest.execute.description == "Execute")
        #expect(ControlPointRequest.setPRN(12).description == "Set PRN 12")
        let unknown = ControlPointRequest.unknown(opcode: DFUOpcode(rawValue: 0x05), parameters: [0x01])
        #expect(unknown.description == "Unknown (0x05) 01")
        #expect(DFUObjectType(rawValue: 0x09).description == "unknown type 0x09")
    }
}
