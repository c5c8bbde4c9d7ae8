import BLECore

/// One Attribute Protocol PDU (Core v5.x Vol 3 Part F §3.3), as carried whole in one L2CAP frame:
///
///     Attribute Opcode (1) | Attribute Parameters (0 to ATT_MTU - 1)
///
/// All multi-octet fields are little-endian (§3.2.9 / Vol 3 Part A). Each case below gives the layout of its
/// parameters after the opcode octet. ``init(decoding:)`` is strict: fixed-size PDUs reject
/// trailing bytes, lists must be whole and non-empty. It does not judge handle values (an inverted or zero handle
/// range is the server's business, answered with an Error Response per §3.4.3.1) nor MTU bounds (the bearer's).
///
/// Opcodes without a case of their own (Prepare/Execute Write, Read Multiple, Signed Write Command, anything
/// unassigned) decode to ``unknown(opcode:parameters:)`` and re-encode byte-identically.
public enum ATTPDU: Hashable, Sendable, CustomStringConvertible {
    /// Error Response (§3.4.1.1), opcode 0x01:
    ///
    ///     Request Opcode In Error (1) | Attribute Handle In Error (2) | Error Code (1)
    case errorResponse(requestOpcode: ATTOpcode, handle: UInt16, error: ATTErrorCode)

    /// Exchange MTU Request (§3.4.2.1), opcode 0x02:
    ///
    ///     Client Rx MTU (2)
    case exchangeMTURequest(clientRxMTU: UInt16)

    /// Exchange MTU Response (§3.4.2.2), opcode 0x03:
    ///
    ///     Server Rx MTU (2)
    case exchangeMTUResponse(serverRxMTU: UInt16)

    /// Find Information Request (§3.4.3.1), opcode 0x04:
    ///
    ///     Starting Handle (2) | Ending Handle (2)
    case findInformationRequest(startHandle: UInt16, endHandle: UInt16)

    /// Find Information Response (§3.4.3.2), opcode 0x05:
    ///
    ///     Format (1) | Information Data (4 to ATT_MTU - 2)
    ///     Format 0x01: { Handle (2) | 16-bit UUID (2) }...
    ///     Format 0x02: { Handle (2) | 128-bit UUID (16) }...
    ///
    /// Encoding writes format 0x01 when every entry's UUID has a 16-bit alias, else format 0x02 with every UUID in
    /// 128-bit form, so any list encodes to a valid PDU. An empty list encodes (format 0x01, no data) but is not a
    /// valid PDU and does not decode.
    case findInformationResponse([ATTHandleUUID])

    /// Find By Type Value Request (§3.4.3.3), opcode 0x06:
    ///
    ///     Starting Handle (2) | Ending Handle (2) | Attribute Type (2, a 16-bit UUID) |
    ///         Attribute Value (0 to ATT_MTU - 7)
    case findByTypeValueRequest(startHandle: UInt16, endHandle: UInt16, type: UInt16, value: [UInt8])

    /// Find By Type Value Response (§3.4.3.4), opcode 0x07:
    ///
    ///     Handles Information List (4 to ATT_MTU - 1): { Found Attribute Handle (2) | Group End Handle (2) }...
    case findByTypeValueResponse([ATTHandleRange])

    /// Read By Type Request (§3.4.4.1), opcode 0x08:
    ///
    ///     Starting Handle (2) | Ending Handle (2) | Attribute Type (2 or 16, a UUID)
    ///
    /// The type is written in its shortest ATT form: 2 octets for a 16-bit alias, else 16 (a 32-bit UUID goes out
    /// as 128-bit, §3.2.1).
    case readByTypeRequest(startHandle: UInt16, endHandle: UInt16, type: BluetoothUUID)

    /// Read By Type Response (§3.4.4.2), opcode 0x09:
    ///
    ///     Length (1) | Attribute Data List (2 to ATT_MTU - 2):
    ///         { Attribute Handle (2) | Attribute Value (Length - 2) }...
    ///
    /// Every entry has the same value length; encoding takes Length from the first entry. Callers (a server) must
    /// stop the list at the first value of a different length, as §3.4.4.1 requires; a mixed list encodes to bytes
    /// that do not decode.
    case readByTypeResponse([ATTHandleValue])

    /// Read Request (§3.4.4.3), opcode 0x0A:
    ///
    ///     Attribute Handle (2)
    case readRequest(handle: UInt16)

    /// Read Response (§3.4.4.4), opcode 0x0B:
    ///
    ///     Attribute Value (0 to ATT_MTU - 1)
    case readResponse(value: [UInt8])

    /// Read Blob Request (§3.4.4.5), opcode 0x0C:
    ///
    ///     Attribute Handle (2) | Value Offset (2)
    case readBlobRequest(handle: UInt16, offset: UInt16)

    /// Read Blob Response (§3.4.4.6), opcode 0x0D:
    ///
    ///     Part Attribute Value (0 to ATT_MTU - 1)
    case readBlobResponse(value: [UInt8])

    /// Read By Group Type Request (§3.4.4.9), opcode 0x10:
    ///
    ///     Starting Handle (2) | Ending Handle (2) | Attribute Group Type (2 or 16, a UUID)
    case readByGroupTypeRequest(startHandle: UInt16, endHandle: UInt16, type: BluetoothUUID)

    /// Read By Group Type Response (§3.4.4.10), opcode 0x11:
    ///
    ///     Length (1) | Attribute Data List (4 to ATT_MTU - 2):
    ///         { Attribute Handle (2) | End Group Handle (2) | Attribute Value (Length - 4) }...
    ///
    /// As for ``readByTypeResponse(_:)``, every entry has the same value length, taken from the first entry.
    case readByGroupTypeResponse([ATTGroupValue])

    /// Write Request (§3.4.5.1), opcode 0x12:
    ///
    ///     Attribute Handle (2) | Attribute Value (0 to ATT_MTU - 3)
    case writeRequest(handle: UInt16, value: [UInt8])

    /// Write Response (§3.4.5.2), opcode 0x13: no parameters.
    case writeResponse

    /// Write Command (§3.4.5.3), opcode 0x52:
    ///
    ///     Attribute Handle (2) | Attribute Value (0 to ATT_MTU - 3)
    case writeCommand(handle: UInt16, value: [UInt8])

    /// Handle Value Notification (§3.4.7.1), opcode 0x1B:
    ///
    ///     Attribute Handle (2) | Attribute Value (0 to ATT_MTU - 3)
    case handleValueNotification(handle: UInt16, value: [UInt8])

    /// Handle Value Indication (§3.4.7.2), opcode 0x1D:
    ///
    ///     Attribute Handle (2) | Attribute Value (0 to ATT_MTU - 3)
    case handleValueIndication(handle: UInt16, value: [UInt8])

    /// Handle Value Confirmation (§3.4.7.3), opcode 0x1E: no parameters.
    case handleValueConfirmation

    /// Any opcode without a case above, with its parameters as received:
    ///
    ///     Attribute Parameters (0 to ATT_MTU - 1)
    ///
    /// Decoding never produces this for an opcode that has its own case; a value built by hand with such an opcode
    /// encodes as given, but decodes back to that opcode's own case.
    case unknown(opcode: ATTOpcode, parameters: [UInt8])

    /// The opcode octet this PDU starts with.
    public var opcode: ATTOpcode {
        switch self {
        case .errorResponse: .errorResponse
        case .exchangeMTURequest: .exchangeMTURequest
        case .exchangeMTUResponse: .exchangeMTUResponse
        case .findInformationRequest: .findInformationRequest
        case .findInformationResponse: .findInformationResponse
        case .findByTypeValueRequest: .findByTypeValueRequest
        case .findByTypeValueResponse: .findByTypeValueResponse
        case .readByTypeRequest: .readByTypeRequest
        case .readByTypeResponse: .readByTypeResponse
        case .readRequest: .readRequest
        case .readResponse: .readResponse
        case .readBlobRequest: .readBlobRequest
        case .readBlobResponse: .readBlobResponse
        case .readByGroupTypeRequest: .readByGroupTypeRequest
        case .readByGroupTypeResponse: .readByGroupTypeResponse
        case .writeRequest: .writeRequest
        case .writeResponse: .writeResponse
        case .writeCommand: .writeCommand
        case .handleValueNotification: .handleValueNotification
        case .handleValueIndication: .handleValueIndication
        case .handleValueConfirmation: .handleValueConfirmation
        case .unknown(let opcode, _): opcode
        }
    }

    /// The opcodes that decode to a case of their own (everything else decodes to ``unknown(opcode:parameters:)``).
    public static let modelledOpcodes: Set<ATTOpcode> = [
        .errorResponse, .exchangeMTURequest, .exchangeMTUResponse, .findInformationRequest, .findInformationResponse,
        .findByTypeValueRequest, .findByTypeValueResponse, .readByTypeRequest, .readByTypeResponse, .readRequest,
        .readResponse, .readBlobRequest, .readBlobResponse, .readByGroupTypeRequest, .readByGroupTypeResponse,
        .writeRequest, .writeResponse, .writeCommand, .handleValueNotification, .handleValueIndication,
        .handleValueConfirmation,
    ]
}
