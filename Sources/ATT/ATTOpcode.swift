/// An ATT opcode: the first octet of every Attribute PDU (Core v5.x Vol 3 Part F §3.3, summary in §3.4.8).
///
///     bit:   7                  6              5...0
///         [ Authentication   | Command      | Method ]
///         [ Signature flag   | flag (0x40)  |        ]
///
/// A `RawRepresentable` struct rather than an enum, so that opcodes this codec does not model survive decoding,
/// re-encode unchanged and print as `Unknown (0xNN)`.
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public init(_ rawValue: UInt8) {
        self.rawValue = rawValue
    }

    // §3.4.1 Error handling.
    /// ATT_ERROR_RSP (§3.4.1.1).
    public static let errorResponse = ATTOpcode(0x01)
    // §3.4.2 MTU exchange.
    /// ATT_EXCHANGE_MTU_REQ (§3.4.2.1).
    public static let exchangeMTURequest = ATTOpcode(0x02)
    /// ATT_EXCHANGE_MTU_RSP (§3.4.2.2).
    public static let exchangeMTUResponse = ATTOpcode(0x03)
    // §3.4.3 Find information.
    /// ATT_FIND_INFORMATION_REQ (§3.4.3.1).
    public static let findInformationRequest = ATTOpcode(0x04)
    /// ATT_FIND_INFORMATION_RSP (§3.4.3.2).
    public static let findInformationResponse = ATTOpcode(0x05)
    /// ATT_FIND_BY_TYPE_VALUE_REQ (§3.4.3.3).
    public static let findByTypeValueRequest = ATTOpcode(0x06)
    /// ATT_FIND_BY_TYPE_VALUE_RSP (§3.4.3.4).
    public static let findByTypeValueResponse = ATTOpcode(0x07)
    // §3.4.4 Reading attributes.
    /// ATT_READ_BY_TYPE_REQ (§3.4.4.1).
    public static let readByTypeRequest = ATTOpcode(0x08)
    /// ATT_READ_BY_TYPE_RSP (§3.4.4.2).
    public static let readByTypeResponse = ATTOpcode(0x09)
    /// ATT_READ_REQ (§3.4.4.3).
    public static let readRequest = ATTOpcode(0x0A)
    /// ATT_READ_RSP (§3.4.4.4).
    public static let readResponse = ATTOpcode(0x0B)
    /// ATT_READ_BLOB_REQ (§3.4.4.5).
    public static let readBlobRequest = ATTOpcode(0x0C)
    /// ATT_READ_BLOB_RSP (§3.4.4.6).
    public static let readBlobResponse = ATTOpcode(0x0D)
    /// ATT_READ_MULTIPLE_REQ (§3.4.4.7).
    public static let readMultipleRequest = ATTOpcode(0x0E)
    /// ATT_READ_MULTIPLE_RSP (§3.4.4.8).
    public static let readMultipleResponse = ATTOpcode(0x0F)
    /// ATT_READ_BY_GROUP_TYPE_REQ (§3.4.4.9).
    public static let readByGroupTypeRequest = ATTOpcode(0x10)
    /// ATT_READ_BY_GROUP_TYPE_RSP (§3.4.4.10).
    public static let readByGroupTypeResponse = ATTOpcode(0x11)
    /// ATT_READ_MULTIPLE_VARIABLE_REQ (§3.4.4.11, Core v5.2+).
    public static let readMultipleVariableRequest = ATTOpcode(0x20)
    /// ATT_READ_MULTIPLE_VARIABLE_RSP (§3.4.4.12, Core v5.2+).
    public static let readMultipleVariableResponse = ATTOpcode(0x21)
    // §3.4.5 Writing attributes.
    /// ATT_WRITE_REQ (§3.4.5.1).
    public static let writeRequest = ATTOpcode(0x12)
    /// ATT_WRITE_RSP (§3.4.5.2).
    public static let writeResponse = ATTOpcode(0x13)
    /// ATT_WRITE_CMD (§3.4.5.3).
    public static let writeCommand = ATTOpcode(0x52)
    /// ATT_SIGNED_WRITE_CMD (§3.4.5.4).
    public static let signedWriteCommand = ATTOpcode(0xD2)
    // §3.4.6 Queued writes.
    /// ATT_PREPARE_WRITE_REQ (§3.4.6.1).
    public static let prepareWriteRequest = ATTOpcode(0x16)
    /// ATT_PREPARE_WRITE_RSP (§3.4.6.2).
    public static let prepareWriteResponse = ATTOpcode(0x17)
    /// ATT_EXECUTE_WRITE_REQ (§3.4.6.3).
    public static let executeWriteRequest = ATTOpcode(0x18)
    /// ATT_EXECUTE_WRITE_RSP (§3.4.6.4).
    public static let executeWriteResponse = ATTOpcode(0x19)
    // §3.4.7 Server initiated.
    /// ATT_HANDLE_VALUE_NTF (§3.4.7.1).
    public static let handleValueNotification = ATTOpcode(0x1B)
    /// ATT_HANDLE_VALUE_IND (§3.4.7.2).
    public static let handleValueIndication = ATTOpcode(0x1D)
    /// ATT_HANDLE_VALUE_CFM (§3.4.7.3).
    public static let handleValueConfirmation = ATTOpcode(0x1E)
    /// ATT_MULTIPLE_HANDLE_VALUE_NTF (§3.4.7.4, Core v5.2+).
    public static let multipleHandleValueNotification = ATTOpcode(0x23)

    /// Core v5.x Vol 3 Part F §3.3: "Command Flag … set to one if the PDU is a command."
    static let commandFlag: UInt8 = 0x40
    /// Core v5.x Vol 3 Part F §3.3: the Authentication Signature Flag.
    static let signatureFlag: UInt8 = 0x80

    /// Whether bit 6 (the command flag) is set: the PDU never gets a response (§3.3).
    public var isCommand: Bool { rawValue & Self.commandFlag != 0 }

    /// Whether bit 7 is set: a 12-octet Authentication Signature follows the parameters (§3.3.1).
    public var hasAuthenticationSignature: Bool { rawValue & Self.signatureFlag != 0 }

    /// The method class of this opcode, as BlueZ's `att_opcode_type_table` assigns it: the known opcodes by table,
    /// any other opcode with the command flag (0x40) as a command, the rest `.unknown`.
    public var kind: ATTOpcodeKind {
        if let known = Self.table[rawValue] { return known.kind }
        return isCommand ? .command : .unknown
    }

    /// The response opcode that completes this request (§3.4.8), or nil if this is not a known request.
    /// An Error Response (0x01) may complete any request instead.
    public var responseOpcode: ATTOpcode? {
        guard kind == .request, rawValue != 0 else { return nil }
        let response = ATTOpcode(rawValue &+ 1)
        return response.kind == .response ? response : nil
    }

    /// The spec name ("Write Request"), or nil for an opcode this module does not know.
    public var name: String? { Self.table[rawValue]?.name }

    /// "Write Request (0x12)", or "Unknown (0x40)".
    public var description: String { "\(name ?? "Unknown") (\(hex2(rawValue)))" }

    private static let table: [UInt8: (name: String, kind: ATTOpcodeKind)] = [
        0x01: ("Error Response", .response),
        0x02: ("Exchange MTU Request", .request),
        0x03: ("Exchange MTU Response", .response),
        0x04: ("Find Information Request", .request),
        0x05: ("Find Information Response", .response),
        0x06: ("Find By Type Value Request", .request),
        0x07: ("Find By Type Value Response", .response),
        0x08: ("Read By Type Request", .request),
        0x09: ("Read By Type Response", .response),
        0x0A: ("Read Request", .request),
        0x0B: ("Read Response", .response),
        0x0C: ("Read Blob Request", .request),
        0x0D: ("Read Blob Response", .response),
        0x0E: ("Read Multiple Request", .request),
        0x0F: ("Read Multiple Response", .response),
        0x10: ("Read By Group Type Request", .request),
        0x11: ("Read By Group Type Response", .response),
        0x12: ("Write Request", .request),
        0x13: ("Write Response", .response),
        0x16: ("Prepare Write Request", .request),
        0x17: ("Prepare Write Response", .response),
        0x18: ("Execute Write Request", .request),
        0x19: ("Execute Write Response", .response),
        0x1B: ("Handle Value Notification", .notification),
        0x1D: ("Handle Value Indication", .indication),
        0x1E: ("Handle Value Confirmation", .confirmation),
        0x20: ("Read Multiple Variable Request", .request),
        0x21: ("Read Multiple Variable Response", .response),
        0x23: ("Multiple Handle Value Notification", .notification),
        0x52: ("Write Command", .command),
        0xD2: ("Signed Write Command", .command),
    ]
}

/// The six ATT method types (Core v5.x Vol 3 Part F §3.3, §3.4.8), which decide the bearer's transaction rules:
/// a request waits for its response, an indication for its confirmation, the rest wait for nothing (§3.3.2).
public enum ATTOpcodeKind: Hashable, Sendable, CustomStringConvertible {
    /// Client to server; one outstanding at a time, answered by a response or an Error Response.
    case request
    /// Server to client, completing the outstanding request.
    case response
    /// Client to server; never answered (bit 0x40 set).
    case command
    /// Server to client; never answered.
    case notification
    /// Server to client; one outstanding at a time, answered by a confirmation.
    case indication
    /// Client to server, completing the outstanding indication.
    case confirmation
    /// An opcode without the command flag that is not in the table; a server answers a request-like unknown
    /// opcode with Request Not Supported (§3.4.1.1) and ignores the rest.
    case unknown

    public var description: String {
        switch self {
        case .request: "request"
        case .response: "response"
        case .command: "command"
        case .notification: "notification"
        case .indication: "indication"
        case .confirmation: "confirmation"
        case .unknown: "unknown"
        }
    }
}

/// "0x0A": two upper-case hex digits.
func hex2(_ value: UInt8) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return "0x" + (digits.count < 2 ? "0" + digits : digits)
}

/// "0x000E": four upper-case hex digits, as handles are written.
func hex4(_ value: UInt16) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: 4 - digits.count) + digits
}
