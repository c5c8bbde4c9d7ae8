import ATT
import BLECore
import Testing

/// Builds random valid PDUs of every case.
struct PDUGenerator {
    var rng: SplitMix64

    mutating func u8() -> UInt8 { UInt8.random(in: .min ... .max, using: &rng) }
    mutating func u16() -> UInt16 { UInt16.random(in: .min ... .max, using: &rng) }
    mutating func bytes(_ range: ClosedRange<Int>) -> [UInt8] {
        (0..<Int.random(in: range, using: &rng)).map { _ in u8() }
    }
    mutating func count(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func bool() -> Bool { Bool.random(using: &rng) }

    mutating func uuid128() -> BluetoothUUID {
        var bytes = bytes(16...16)
        bytes[15] |= 0x01  // never the base UUID's last byte (0xFB), so never a 16-bit alias
        return BluetoothUUID(bigEndianBytes: bytes) ?? BluetoothUUID(0)
    }

    mutating func uuid() -> BluetoothUUID { bool() ? BluetoothUUID(u16()) : uuid128() }

    mutating func unknownOpcode() -> ATTOpcode {
        while true {
            let opcode = ATTOpcode(u8())
            if !ATTPDU.modelledOpcodes.contains(opcode) { return opcode }
        }
    }

    mutating func pdu() -> ATTPDU {
        switch count(0...21) {
        case 0: return .errorResponse(requestOpcode: ATTOpcode(u8()), handle: u16(), error: ATTErrorCode(u8()))
        case 1: return .exchangeMTURequest(clientRxMTU: u16())
        case 2: return .exchangeMTUResponse(serverRxMTU: u16())
        case 3: return .findInformationRequest(startHandle: u16(), endHandle: u16())
        case 4:
            let short = bool()
            return .findInformationResponse(
                (0..<count(1...8)).map { _ in
                    ATTHandleUUID(handle: u16(), uuid: short ? BluetoothUUID(u16()) : uuid128())
                })
        case 5:
            return .findByTypeValueRequest(startHandle: u16(), endHandle: u16(), type: u16(), value: bytes(0...30))
        case 6:
            return .findByTypeValueResponse((0..<count(1...8)).map { _ in ATTHandleRange(start: u16(), end: u16()) })
        case 7: return .readByTypeRequest(startHandle: u16(), endHandle: u16(), type: uuid())
        case 8:
            let length = count(0...30)
            return .readByTypeResponse(
                (0..<count(1...6)).map { _ in ATTHandleValue(handle: u16(), value: bytes(length...length)) })
        case 9: return .readRequest(handle: u16())
        case 10: return .readResponse(value: bytes(0...40))
        case 11: return .readBlobRequest(handle: u16(), offset: u16())
        case 12: return .readBlobResponse(value: bytes(0...40))
        case 13: return .readByGroupTypeRequest(startHandle: u16(), endHandle: u16(), type: uuid())
        case 14:
            let length = count(0...30)
            return .readByGroupTypeResponse(
                (0..<count(1...6)).map { _ in
                    ATTGroupValue(handle: u16(), endGroupHandle: u16(), value: bytes(length...length))
                })
        case 15: return .writeRequest(handle: u16(), value: bytes(0...40))
        case 16: return .writeResponse
        case 17: return .writeCommand(handle: u16(), value: bytes(0...250))
        case 18: return .handleValueNotification(handle: u16(), value: bytes(0...40))
        case 19: return .handleValueIndication(handle: u16(), value: bytes(0...40))
        case 20: return .handleValueConfirmation
        default: return .unknown(opcode: unknownOpcode(), parameters: bytes(0...40))
        }
    }
}

@Suite("ATT PDU randomized", .timeLimit(.minutes(2)))
struct ATTPDURandomTests {
    @Test("modelledOpcodes lists exactly the opcodes with a case of their own")
    func modelled() {
        #expect(ATTPDU.modelledOpcodes.count == 21)
        for raw in UInt8.min...UInt8.max {
            let opcode = ATTOpcode(raw)
            // An opcode alone is a whole PDU for the parameterless cases and the variable-tail ones; the decoder
            // yields .unknown exactly for the opcodes that are not modelled.
            if case .unknown(let decodedOpcode, let parameters)? = decoded([raw]) {
                #expect(!ATTPDU.modelledOpcodes.contains(opcode))
                #expect(decodedOpcode == opcode && parameters.isEmpty)
            } else {
                #expect(ATTPDU.modelledOpcodes.contains(opcode), "\(opcode)")
            }
        }
    }

    @Test("random valid PDUs survive encode then decode (seed 0xB1ED_F00D)")
    func roundTrip() throws {
        var generator = PDUGenerator(rng: SplitMix64(seed: 0xB1ED_F00D))
        var seen = Set<ATTOpcode>()
        for _ in 0..<3000 {
            let pdu = generator.pdu()
            seen.insert(pdu.opcode)
            let bytes = pdu.encoded
            let back = try ATTPDU(decoding: bytes)
            #expect(back == pdu, "\(pdu)")
            #expect(back.encoded == bytes)
            #expect(!back.description.isEmpty)
        }
        #expect(ATTPDU.modelledOpcodes.isSubset(of: seen))
    }

    @Test("random bytes never crash the decoder; whatever decodes re-encodes identically (seed 42)")
    func randomBytes() {
        var generator = PDUGenerator(rng: SplitMix64(seed: 42))
        let opcodes = Array(ATTPDU.modelledOpcodes)
        var decodedCount = 0
        var codes: [ATTDecodingError.Code: Int] = [:]
        for _ in 0..<20000 {
            var bytes = generator.bytes(0...24)
            // Bias towards modelled opcodes so that the parameter decoders get most of the input.
            if !bytes.isEmpty, generator.count(0...3) != 0 {
                bytes[0] = opcodes[generator.count(0...(opcodes.count - 1))].rawValue
            }
            do throws(ATTDecodingError) {
                let pdu = try ATTPDU(decoding: bytes)
                decodedCount += 1
                #expect(pdu.encoded == bytes, "\(bytes.hexString) -> \(pdu)")
            } catch {
                codes[error.code, default: 0] += 1
                #expect(!error.reason.isEmpty)
                #expect((error.code == .empty) == bytes.isEmpty)
            }
        }
        // The input mix reaches every outcome.
        #expect(decodedCount > 1000)
        #expect(codes[.truncated, default: 0] > 100)
        #expect(codes[.malformed, default: 0] > 100)
        #expect(codes[.empty, default: 0] > 0)
    }
}
