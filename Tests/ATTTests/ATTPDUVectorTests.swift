import ATT
import BLECore
import Testing

@Suite("ATT PDU vectors", .timeLimit(.minutes(2)))
struct ATTPDUVectorTests {
    @Test("every modelled opcode and a few unknown ones have a vector")
    func coverage() {
        let covered = Set(vectors.map(\.pdu.opcode))
        #expect(ATTPDU.modelledOpcodes.isSubset(of: covered))
        #expect(covered.contains { !ATTPDU.modelledOpcodes.contains($0) })
        for vector in vectors { #expect(!vector.bytes.isEmpty, "\(vector.name): bad hex") }
    }

    @Test("bytes decode to the value", arguments: vectors)
    func decodes(_ vector: Vector) throws {
        let pdu = try ATTPDU(decoding: vector.bytes)
        #expect(pdu == vector.pdu)
        #expect(pdu.opcode.rawValue == vector.bytes[0])
    }

    @Test("the value encodes to the bytes", arguments: vectors)
    func encodes(_ vector: Vector) {
        #expect(vector.pdu.encoded == vector.bytes)
    }

    @Test("a slice with a non-zero start index decodes the same", arguments: vectors)
    func decodesSlice(_ vector: Vector) throws {
        let buffer: [UInt8] = [0xEE, 0xEE] + vector.bytes + [0xEE]
        let slice = buffer[2..<(buffer.count - 1)]
        #expect(try ATTPDU(decoding: slice) == vector.pdu)
    }

    @Test("every shorter prefix is rejected, or is itself a valid PDU where the tail is variable", arguments: vectors)
    func prefixes(_ vector: Vector) {
        #expect(decodingError([])?.code == .empty)
        for length in 1..<vector.bytes.count {
            let prefix = Array(vector.bytes[..<length])
            let expected = vector.prefixes.outcome(prefixLength: length)
            do throws(ATTDecodingError) {
                let pdu = try ATTPDU(decoding: prefix)
                #expect(expected == .decodes, "\(vector.name)[..<\(length)] decoded as \(pdu)")
                #expect(pdu.encoded == prefix, "\(vector.name)[..<\(length)] is not canonical")
                #expect(pdu.opcode == vector.pdu.opcode)
            } catch {
                switch expected {
                case .decodes: Issue.record("\(vector.name)[..<\(length)] failed: \(error)")
                case .truncated: #expect(error.code == .truncated, "\(vector.name)[..<\(length)]: \(error)")
                case .malformed: #expect(error.code == .malformed, "\(vector.name)[..<\(length)]: \(error)")
                }
            }
        }
    }

    @Test("a truncation names the PDU and the field")
    func truncationReasons() {
        let rows: [(bytes: [UInt8], reason: String)] = [
            ([0x0A, 0x03], "Read Request: truncated: attribute handle needs 2 byte(s), 1 left"),
            ([0x01, 0x0A, 0x03, 0x00], "Error Response: truncated: error code needs 1 byte(s), 0 left"),
            (
                [0x09, 0x04, 0x01, 0x00],
                "Read By Type Response: truncated: attribute data list needs 4 byte(s), 2 left"
            ),
            ([0x09], "Read By Type Response: truncated: length needs 1 byte(s), 0 left"),
            ([0x05], "Find Information Response: truncated: format needs 1 byte(s), 0 left"),
            (
                [0x05, 0x02, 0x01, 0x00, 0x00, 0x28],
                "Find Information Response: truncated: information data needs 18 byte(s), 4 left"
            ),
            (
                [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x28],
                "Read By Type Request: truncated: attribute type needs 2 byte(s), 1 left"
            ),
            (
                [0x07, 0x01, 0x00],
                "Find By Type Value Response: truncated: handles information list needs 4 byte(s), 2 left"
            ),
        ]
        for row in rows {
            let error = decodingError(row.bytes)
            #expect(error?.code == .truncated)
            #expect(error?.reason == row.reason)
        }
    }

    @Test("empty input is .empty, not truncated")
    func empty() {
        let error = decodingError([])
        #expect(error?.code == .empty)
        #expect(error?.code != .truncated)
        #expect(throws: ATTDecodingError(.empty, "")) { try ATTPDU(decoding: ArraySlice<UInt8>()) }
    }
}
