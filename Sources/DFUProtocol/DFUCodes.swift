import BLECore

/// A Secure DFU control point opcode (nRF5 SDK `nrf_dfu_op_t`). Open: unknown opcodes survive and print.
public struct DFUOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let protocolVersion = DFUOpcode(rawValue: 0x00)
    public static let create = DFUOpcode(rawValue: 0x01)
    public static let setPRN = DFUOpcode(rawValue: 0x02)
    public static let calculateChecksum = DFUOpcode(rawValue: 0x03)
    public static let execute = DFUOpcode(rawValue: 0x04)
    public static let select = DFUOpcode(rawValue: 0x06)
    public static let getMTU = DFUOpcode(rawValue: 0x07)
    public static let write = DFUOpcode(rawValue: 0x08)
    public static let ping = DFUOpcode(rawValue: 0x09)
    public static let hardwareVersion = DFUOpcode(rawValue: 0x0A)
    public static let firmwareVersion = DFUOpcode(rawValue: 0x0B)
    public static let abort = DFUOpcode(rawValue: 0x0C)
    public static let response = DFUOpcode(rawValue: 0x60)

    public var name: String? {
        switch rawValue {
        case 0x00: "Protocol Version"
        case 0x01: "Create"
        case 0x02: "Set PRN"
        case 0x03: "Calculate Checksum"
        case 0x04: "Execute"
        case 0x06: "Select"
        case 0x07: "Get MTU"
        case 0x08: "Write"
        case 0x09: "Ping"
        case 0x0A: "Hardware Version"
        case 0x0B: "Firmware Version"
        case 0x0C: "Abort"
        case 0x60: "Response"
        default: nil
        }
    }

    public var description: String { "\(name ?? "Unknown") (0x\(hex2(rawValue)))" }
}

/// Object types of Create and Select (`nrf_dfu_obj_type_t`).
public struct DFUObjectType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The init packet.
    public static let command = DFUObjectType(rawValue: 0x01)
    /// Firmware data.
    public static let data = DFUObjectType(rawValue: 0x02)
    public var description: String {
        switch rawValue {
        case 0x01: "command"
        case 0x02: "data"
        default: "unknown type 0x\(hex2(rawValue))"
        }
    }
}

/// The result byte of a control point response (`nrf_dfu_result_t`). Open code space.
public struct DFUResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let invalidCode = DFUResultCode(rawValue: 0x00)
    public static let success = DFUResultCode(rawValue: 0x01)
    public static let opCodeNotSupported = DFUResultCode(rawValue: 0x02)
    public static let invalidParameter = DFUResultCode(rawValue: 0x03)
    public static let insufficientResources = DFUResultCode(rawValue: 0x04)
    public static let invalidObject = DFUResultCode(rawValue: 0x05)
    public static let signatureMismatch = DFUResultCode(rawValue: 0x06)
    public static let unsupportedType = DFUResultCode(rawValue: 0x07)
    public static let operationNotPermitted = DFUResultCode(rawValue: 0x08)
    public static let operationFailed = DFUResultCode(rawValue: 0x0A)
    /// The next byte carries a ``DFUExtendedError``.
    public static let extendedError = DFUResultCode(rawValue: 0x0B)

    public var name: String? {
        switch rawValue {
        case 0x00: "invalid code"
        case 0x01: "success"
        case 0x02: "opcode not supported"
        case 0x03: "invalid parameter"
        case 0x04: "insufficient resources"
        case 0x05: "invalid object"
        case 0x06: "signature mismatch"
        case 0x07: "unsupported type"
        case 0x08: "operation not permitted"
        case 0x0A: "operation failed"
        case 0x0B: "extended error"
        default: nil
        }
    }

    public var description: String { "\(name ?? "unknown result") (0x\(hex2(rawValue)))" }
}

/// The extended error byte that follows result 0x0B (`nrf_dfu_ext_error_code_t`). Open code space.
public struct DFUExtendedError: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let noError = DFUExtendedError(rawValue: 0x00)
    public static let invalidErrorCode = DFUExtendedError(rawValue: 0x01)
    public static let wrongCommandFormat = DFUExtendedError(rawValue: 0x02)
    public static let unknownCommand = DFUExtendedError(rawValue: 0x03)
    public static let initCommandInvalid = DFUExtendedError(rawValue: 0x04)
    public static let firmwareVersionFailure = DFUExtendedError(rawValue: 0x05)
    public static let hardwareVersionFailure = DFUExtendedError(rawValue: 0x06)
    public static let softDeviceVersionFailure = DFUExtendedError(rawValue: 0x07)
    public static let signatureMissing = DFUExtendedError(rawValue: 0x08)
    public static let wrongHashType = DFUExtendedError(rawValue: 0x09)
    public static let hashFailed = DFUExtendedError(rawValue: 0x0A)
    public static let wrongSignatureType = DFUExtendedError(rawValue: 0x0B)
    public static let verificationFailed = DFUExtendedError(rawValue: 0x0C)
    public static let insufficientSpace = DFUExtendedError(rawValue: 0x0D)
    public static let firmwareAlreadyPresent = DFUExtendedError(rawValue: 0x0E)

    public var name: String? {
        switch rawValue {
        case 0x00: "no error"
        case 0x01: "invalid error code"
        case 0x02: "wrong command format"
        case 0x03: "unknown command"
        case 0x04: "init command invalid"
        case 0x05: "firmware version too low"
        case 0x06: "hardware version mismatch"
        case 0x07: "SoftDevice version mismatch"
        case 0x08: "signature missing"
        case 0x09: "wrong hash type"
        case 0x0A: "hash failed"
        case 0x0B: "wrong signature type"
        case 0x0C: "image verification failed"
        case 0x0D: "insufficient space"
        case 0x0E: "firmware already present"
        default: nil
        }
    }

    public var description: String { "\(name ?? "unknown extended error") (0x\(hex2(rawValue)))" }
}

/// How a device answered: success, a result code, or an extended error. Nested, never arithmetic.
public enum DFUStatus: Hashable, Sendable, CustomStringConvertible {
    case success
    case failure(DFUResultCode)
    case extended(DFUExtendedError)

    public var description: String {
        switch self {
        case .success: "success"
        case .failure(let code): code.description
        case .extended(let ext): "extended error: \(ext)"
        }
    }
}

/// Malformed or truncated Secure DFU message.
public struct DFUDecodingError: CodedError, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public static let empty = Code(name: "empty")
        public static let truncated = Code(name: "truncated")
        public static let malformed = Code(name: "malformed")
        public var description: String { name }
    }

    public var code: Code
    public var reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code): \(reason)" }

    static func from(_ truncated: ByteReader.Truncated, in message: String) -> DFUDecodingError {
        DFUDecodingError(.truncated, "\(message): \(truncated)")
    }
}

func hex2(_ value: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(value >> 4)], digits[Int(value & 0x0F)]])
}

extension DFUDecodingError.Code: RawRepresentable {
    public init(rawValue: String) { self.init(name: rawValue) }
    public var rawValue: String { name }
}

extension DFUDecodingError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
