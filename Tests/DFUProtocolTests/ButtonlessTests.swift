import BLECore
import DFUProtocol
import Testing

struct ButtonlessVector: Sendable, CustomStringConvertible {
    var bytes: [UInt8]
    var request: ButtonlessRequest
    var description: String { bytes.hexString }
}

let buttonlessVectors: [ButtonlessVector] = [
    // Enter bootloader
    ButtonlessVector(bytes: [0x01], request: .enterBootloader),
    // Set advertisement name "Dfu1" (length 4)
    ButtonlessVector(bytes: [0x02, 0x04, 0x44, 0x66, 0x75, 0x31], request: .setAdvertisementName("Dfu1")),
    // Unknown opcode 0x09 with parameter 0x00
    ButtonlessVector(bytes: [0x09, 0x00], request: .unknown(opcode: 0x09, parameters: [0x00])),
]

@Suite(.timeLimit(.minutes(2))) struct ButtonlessTests {
    @Test(arguments: buttonlessVectors)
    func roundTrip(_ vector: ButtonlessVector) throws {
        #expect(try ButtonlessRequest(decoding: vector.bytes) == vector.request)
        #expect(vector.request.encoded == vector.bytes)
    }

    @Test func setNamePrefixesAreTruncated() {
        let bytes: [UInt8] = [0x02, 0x04, 0x44, 0x66, 0x75, 0x31]
        for length in 0..<bytes.count {
            let prefix = Array(bytes[0..<length])
            #expect(throws: DFUDecodingError(length == 0 ? .empty : .truncated, "")) {
                try ButtonlessRequest(decoding: prefix)
            }
        }
    }

    @Test func enterBootloaderTrailingByteIsMalformed() {
        #expect(throws: DFUDecodingError(.malformed, "")) { try ButtonlessRequest(decoding: [0x01, 0x00]) }
    }

    @Test func responses() throws {
        // 20 | request 01 (enter bootloader) | status 01 success
        #expect(
            try ButtonlessResponse(decoding: [0x20, 0x01, 0x01])
                == ButtonlessResponse(requestOpcode: 1, status: .success))
        // 20 | request 02 (set name) | status 05 invalid advertisement name
        let invalidName = ButtonlessResponse(requestOpcode: 2, status: .invalidAdvertisementName)
        #expect(try ButtonlessResponse(decoding: [0x20, 0x02, 0x05]) == invalidName)
        #expect(invalidName.encoded == [0x20, 0x02, 0x05])
        // unknown status 0x33 survives and prints
        let unknown = try ButtonlessResponse(decoding: [0x20, 0x01, 0x33])
        #expect(unknown.status.rawValue == 0x33)
        #expect(unknown.status.description == "unknown status (0x33)")
        #expect(ButtonlessStatus.notBonded.description == "not bonded (0x07)")
    }

    @Test func responsePrefixes() {
        let bytes: [UInt8] = [0x20, 0x01, 0x01]
        for length in 0..<bytes.count {
            let prefix = Array(bytes[0..<length])
            #expect(throws: DFUDecodingError(length == 0 ? .empty : .truncated, "")) {
                try ButtonlessResponse(decoding: prefix)
            }
        }
        #expect(throws: DFUDecodingError(.malformed, "")) { try ButtonlessResponse(decoding: [0x60, 0x01, 0x01]) }
        #expect(throws: DFUDecodingError(.malformed, "")) {
            try ButtonlessResponse(decoding: [0x20, 0x01, 0x01, 0x00])
        }
    }

    @Test func uuids() {
        #expect(SecureDFUUUID.service == BluetoothUUID(0xFE59))
        #expect(SecureDFUUUID.controlPoint.description.uppercased().hasPrefix("8EC90001"))
        #expect(SecureDFUUUID.packet.description.uppercased().hasPrefix("8EC90002"))
    }
}
