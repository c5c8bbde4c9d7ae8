import ATT
import BLECore
import Testing

@Suite("ATT opcodes, error codes, decoding errors, descriptions", .timeLimit(.minutes(2)))
struct ATTOpcodeTests {
    @Test("opcode kinds follow BlueZ's att_opcode_type_table, then the 0x40 command flag")
    func kinds() {
        let rows: [(UInt8, ATTOpcodeKind)] = [
            (0x01, .response), (0x02, .request), (0x03, .response), (0x04, .request), (0x05, .response),
            (0x06, .request), (0x07, .response), (0x08, .request), (0x09, .response), (0x0A, .request),
            (0x0B, .response), (0x0C, .request), (0x0D, .response), (0x0E, .request), (0x0F, .response),
            (0x10, .request), (0x11, .response), (0x12, .request), (0x13, .response), (0x16, .request),
            (0x17, .response), (0x18, .request), (0x19, .response), (0x1B, .notification), (0x1D, .indication),
            (0x1E, .confirmation), (0x20, .request), (0x21, .response), (0x23, .notification), (0x52, .command),
            (0xD2, .command),
            // Unassigned: command flag set -> command; otherwise unknown.
            (0x40, .command), (0x41, .command), (0x7F, .command), (0xC0, .command), (0xFF, .command),
            (0x00, .unknown), (0x14, .unknown), (0x15, .unknown), (0x1A, .unknown), (0x1C, .unknown),
            (0x1F, .unknown), (0x80, .unknown), (0x92, .unknown),
        ]
        for (raw, kind) in rows {
            #expect(ATTOpcode(raw).kind == kind, "\(ATTOpcode(raw))")
        }
        #expect(ATTOpcode.writeCommand.isCommand)
        #expect(!ATTOpcode.writeRequest.isCommand)
        #expect(ATTOpcode.signedWriteCommand.hasAuthenticationSignature)
        #expect(!ATTOpcode.writeCommand.hasAuthenticationSignature)
    }

    @Test("the static opcodes have the spec values")
    func values() {
        let rows: [(ATTOpcode, UInt8)] = [
            (.errorResponse, 0x01), (.exchangeMTURequest, 0x02), (.exchangeMTUResponse, 0x03),
            (.findInformationRequest, 0x04), (.findInformationResponse, 0x05), (.findByTypeValueRequest, 0x06),
            (.findByTypeValueResponse, 0x07), (.readByTypeRequest, 0x08), (.readByTypeResponse, 0x09),
            (.readRequest, 0x0A), (.readResponse, 0x0B), (.readBlobRequest, 0x0C), (.readBlobResponse, 0x0D),
            (.readMultipleRequest, 0x0E), (.readMultipleResponse, 0x0F), (.readByGroupTypeRequest, 0x10),
            (.readByGroupTypeResponse, 0x11), (.writeRequest, 0x12), (.writeResponse, 0x13),
            (.prepareWriteRequest, 0x16), (.prepareWriteResponse, 0x17), (.executeWriteRequest, 0x18),
            (.executeWriteResponse, 0x19), (.handleValueNotification, 0x1B), (.handleValueIndication, 0x1D),
            (.handleValueConfirmation, 0x1E), (.writeCommand, 0x52), (.signedWriteCommand, 0xD2),
        ]
        for (opcode, raw) in rows {
            #expect(opcode.rawValue == raw)
            #expect(ATTOpcode(rawValue: raw) == opcode)
        }
    }

    @Test("requests know their response opcode")
    func responseOpcodes() {
        #expect(ATTOpcode.exchangeMTURequest.responseOpcode == .exchangeMTUResponse)
        #expect(ATTOpcode.writeRequest.responseOpcode == .writeResponse)
        #expect(ATTOpcode.readByGroupTypeRequest.responseOpcode == .readByGroupTypeResponse)
        #expect(ATTOpcode.executeWriteRequest.responseOpcode == .executeWriteResponse)
        #expect(ATTOpcode.writeCommand.responseOpcode == nil)
        #expect(ATTOpcode.handleValueIndication.responseOpcode == nil)
        #expect(ATTOpcode(0x40).responseOpcode == nil)
    }

    @Test("opcodes print their name and value; unknown ones print Unknown")
    func opcodeDescriptions() {
        #expect(ATTOpcode.writeRequest.description == "Write Request (0x12)")
        #expect(ATTOpcode.handleValueNotification.description == "Handle Value Notification (0x1B)")
        #expect(ATTOpcode(0x40).description == "Unknown (0x40)")
        #expect(ATTOpcode(0x00).description == "Unknown (0x00)")
        #expect(ATTOpcode(0x40).name == nil)
        for raw in UInt8.min...UInt8.max {
            #expect(ATTOpcode(raw).description.hasSuffix("(\(hex(raw)))"))
        }
    }

    @Test("error codes print their name, application range or Unknown, and keep their raw value")
    func errorCodes() {
        #expect(ATTErrorCode.invalidHandle.description == "Invalid Handle (0x01)")
        #expect(ATTErrorCode.valueNotAllowed.description == "Value Not Allowed (0x13)")
        #expect(ATTErrorCode.insufficientEncryptionKeySize.rawValue == 0x0C)
        #expect(ATTErrorCode.outOfRange.description == "Out Of Range (0xFF)")
        #expect(ATTErrorCode.cccdImproperlyConfigured.rawValue == 0xFD)
        #expect(ATTErrorCode(0x80).description == "Application Error 0x80")
        #expect(ATTErrorCode(0x9F).description == "Application Error 0x9F")
        #expect(ATTErrorCode(0x9F).isApplicationError)
        #expect(!ATTErrorCode(0xA0).isApplicationError)
        #expect(ATTErrorCode(0xA0).description == "Unknown error 0xA0")
        #expect(ATTErrorCode(0x14).description == "Unknown error 0x14")
        #expect(ATTErrorCode(0x00).description == "Unknown error 0x00")
        for raw in UInt8.min...UInt8.max {
            let code = ATTErrorCode(rawValue: raw)
            #expect(code.rawValue == raw)
            #expect(code.description.contains(hex(raw)))
        }
    }

    @Test("an unknown error code survives an Error Response round trip and prints")
    func unknownErrorCodeSurvives() throws {
        // Error Response: request = 0x40 (unknown), handle = 0x0000, error = 0x42 (unknown).
        let bytes: [UInt8] = [0x01, 0x40, 0x00, 0x00, 0x42]
        let pdu = try ATTPDU(decoding: bytes)
        #expect(pdu == .errorResponse(requestOpcode: ATTOpcode(0x40), handle: 0, error: ATTErrorCode(0x42)))
        #expect(pdu.encoded == bytes)
        #expect(pdu.description == "Error Response request=Unknown (0x40) handle=0x0000 error=Unknown error 0x42")
    }

    @Test("decoding errors compare by code only")
    func decodingErrorEquality() {
        let a = ATTDecodingError(.truncated, "one")
        let b = ATTDecodingError(.truncated, "two")
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a != ATTDecodingError(.malformed, "one"))
        #expect(ATTDecodingError(.empty, "x").description == "ATTDecodingError.empty: x")
        #expect(ATTDecodingError.Code.malformed.description == "malformed")
    }

    @Test("PDUs print trace-quality text")
    func pduDescriptions() {
        let rows: [(ATTPDU, String)] = [
            (.writeRequest(handle: 0x0E, value: [0x01, 0x00]), "Write Request handle=0x000E value=01 00"),
            (.writeCommand(handle: 0x10, value: []), "Write Command handle=0x0010 value=(empty)"),
            (
                .errorResponse(requestOpcode: .readRequest, handle: 3, error: .invalidHandle),
                "Error Response request=Read Request (0x0A) handle=0x0003 error=Invalid Handle (0x01)"
            ),
            (.exchangeMTURequest(clientRxMTU: 517), "Exchange MTU Request clientRxMTU=517"),
            (.exchangeMTUResponse(serverRxMTU: 23), "Exchange MTU Response serverRxMTU=23"),
            (
                .findInformationRequest(startHandle: 1, endHandle: 0xFFFF),
                "Find Information Request start=0x0001 end=0xFFFF"
            ),
            (
                .findInformationResponse([ATTHandleUUID(handle: 3, uuid: BluetoothUUID(0x2902))]),
                "Find Information Response [0x0003 2902]"
            ),
            (
                .findByTypeValueRequest(startHandle: 1, endHandle: 0xFFFF, type: 0x2800, value: [0x59, 0xFE]),
                "Find By Type Value Request start=0x0001 end=0xFFFF type=2800 value=59 FE"
            ),
            (
                .findByTypeValueResponse([ATTHandleRange(start: 0x10, end: 0x18)]),
                "Find By Type Value Response [0x0010-0x0018]"
            ),
            (
                .readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: dfuControlPoint),
                "Read By Type Request start=0x0001 end=0xFFFF type=8EC90001-F315-4F60-9FB8-838830DAEA50"
            ),
            (
                .readByTypeResponse([ATTHandleValue(handle: 2, value: [0x0A, 0x03])]),
                "Read By Type Response [0x0002: 0A 03]"
            ),
            (.readRequest(handle: 3), "Read Request handle=0x0003"),
            (.readResponse(value: [0xAB]), "Read Response value=AB"),
            (.readBlobRequest(handle: 3, offset: 22), "Read Blob Request handle=0x0003 offset=22"),
            (.readBlobResponse(value: []), "Read Blob Response value=(empty)"),
            (
                .readByGroupTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: BluetoothUUID(0x2800)),
                "Read By Group Type Request start=0x0001 end=0xFFFF type=2800"
            ),
            (
                .readByGroupTypeResponse([ATTGroupValue(handle: 1, endGroupHandle: 7, value: [0x00, 0x18])]),
                "Read By Group Type Response [0x0001-0x0007: 00 18]"
            ),
            (.writeResponse, "Write Response"),
            (
                .handleValueNotification(handle: 0x0E, value: [0x60, 0x01, 0x01]),
                "Handle Value Notification handle=0x000E value=60 01 01"
            ),
            (.handleValueIndication(handle: 0x12, value: [0x02]), "Handle Value Indication handle=0x0012 value=02"),
            (.handleValueConfirmation, "Handle Value Confirmation"),
            (
                .unknown(opcode: .prepareWriteRequest, parameters: [0x0E, 0x00]),
                "Prepare Write Request (0x16) parameters=0E 00"
            ),
            (.unknown(opcode: ATTOpcode(0x40), parameters: []), "Unknown (0x40) parameters=(empty)"),
        ]
        for (pdu, text) in rows {
            #expect(pdu.description == text)
        }
    }

    @Test("long values are cut in descriptions")
    func longValues() {
        let value = [UInt8](repeating: 0xAA, count: 244)
        let text = ATTPDU.writeCommand(handle: 0x10, value: value).description
        #expect(text.hasSuffix(" … (244 bytes)"))
        #expect(text.split(separator: " ").filter { $0.hasSuffix("AA") }.count == ATTPDU.traceValueLimit)
    }
}

private func hex(_ value: UInt8) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return "0x" + (digits.count < 2 ? "0" + digits : digits)
}
