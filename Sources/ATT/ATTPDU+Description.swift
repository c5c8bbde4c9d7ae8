extension ATTPDU {
    /// Trace-quality text: the PDU name, then its fields ("Write Request handle=0x000E value=01 00").
    /// Handles print as four hex digits, values as spaced upper-case hex, cut after
    /// ``traceValueLimit`` bytes ("… (244 bytes)").
    public var description: String {
        let name = opcode.name ?? opcode.description
        switch self {
        case .errorResponse(let requestOpcode, let handle, let error):
            return "\(name) request=\(requestOpcode) handle=\(hex4(handle)) error=\(error)"
        case .exchangeMTURequest(let mtu):
            return "\(name) clientRxMTU=\(mtu)"
        case .exchangeMTUResponse(let mtu):
            return "\(name) serverRxMTU=\(mtu)"
        case .findInformationRequest(let start, let end):
            return "\(name) start=\(hex4(start)) end=\(hex4(end))"
        case .findInformationResponse(let entries):
            return "\(name) [\(entries.map(\.description).joined(separator: ", "))]"
        case .findByTypeValueRequest(let start, let end, let type, let value):
            return "\(name) start=\(hex4(start)) end=\(hex4(end)) type=\(BLEUUIDText.short(type)) "
                + "value=\(traceHex(value))"
        case .findByTypeValueResponse(let ranges):
            return "\(name) [\(ranges.map(\.description).joined(separator: ", "))]"
        case .readByTypeRequest(let start, let end, let type), .readByGroupTypeRequest(let start, let end, let type):
            return "\(name) start=\(hex4(start)) end=\(hex4(end)) type=\(type)"
        case .readByTypeResponse(let entries):
            return "\(name) [\(entries.map(\.description).joined(separator: ", "))]"
        case .readByGroupTypeResponse(let entries):
            return "\(name) [\(entries.map(\.description).joined(separator: ", "))]"
        case .readRequest(let handle):
            return "\(name) handle=\(hex4(handle))"
        case .readBlobRequest(let handle, let offset):
            return "\(name) handle=\(hex4(handle)) offset=\(offset)"
        case .readResponse(let value), .readBlobResponse(let value):
            return "\(name) value=\(traceHex(value))"
        case .writeRequest(let handle, let value), .writeCommand(let handle, let value),
            .handleValueNotification(let handle, let value), .handleValueIndication(let handle, let value):
            return "\(name) handle=\(hex4(handle)) value=\(traceHex(value))"
        case .writeResponse, .handleValueConfirmation:
            return name
        case .unknown(let opcode, let parameters):
            return "\(opcode) parameters=\(traceHex(parameters))"
        }
    }

    /// How many value bytes ``description`` prints before eliding the rest.
    public static let traceValueLimit = 32
}

/// Text helpers for 16-bit UUIDs given as plain integers (Find By Type Value Request's Attribute Type).
enum BLEUUIDText {
    /// "2800".
    static func short(_ value: UInt16) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}

/// "01 00", "(empty)", or the first ``ATTPDU/traceValueLimit`` bytes then "… (244 bytes)".
func traceHex(_ bytes: [UInt8]) -> String {
    guard !bytes.isEmpty else { return "(empty)" }
    let shown = bytes.prefix(ATTPDU.traceValueLimit).map { byte in
        let digits = String(byte, radix: 16, uppercase: true)
        return digits.count < 2 ? "0" + digits : digits
    }
    let text = shown.joined(separator: " ")
    return bytes.count > ATTPDU.traceValueLimit ? "\(text) … (\(bytes.count) bytes)" : text
}
