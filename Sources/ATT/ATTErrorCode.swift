/// The Error Code field of an Error Response (Core v5.x Vol 3 Part F §3.4.1.1, Table 3.4).
///
///     0x01...0x13   ATT errors (Part F Table 3.4)
///     0x80...0x9F   Application errors, defined by a higher-layer specification
///     0xE0...0xFF   Common profile and service errors (Core Specification Supplement Part B §1.2)
///
/// A `RawRepresentable` struct, so codes this module does not name survive decoding and print
/// ("Unknown error 0x42").
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public init(_ rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// The attribute handle given was not valid on this server.
    public static let invalidHandle = ATTErrorCode(0x01)
    /// The attribute cannot be read.
    public static let readNotPermitted = ATTErrorCode(0x02)
    /// The attribute cannot be written.
    public static let writeNotPermitted = ATTErrorCode(0x03)
    /// The attribute PDU was invalid.
    public static let invalidPDU = ATTErrorCode(0x04)
    /// The attribute requires authentication before it can be read or written.
    public static let insufficientAuthentication = ATTErrorCode(0x05)
    /// The server does not support the request received from the client.
    public static let requestNotSupported = ATTErrorCode(0x06)
    /// The offset specified was past the end of the attribute.
    public static let invalidOffset = ATTErrorCode(0x07)
    /// The attribute requires authorization before it can be read or written.
    public static let insufficientAuthorization = ATTErrorCode(0x08)
    /// Too many prepare writes have been queued.
    public static let prepareQueueFull = ATTErrorCode(0x09)
    /// No attribute found within the given attribute handle range.
    public static let attributeNotFound = ATTErrorCode(0x0A)
    /// The attribute cannot be read using the Read Blob Request.
    public static let attributeNotLong = ATTErrorCode(0x0B)
    /// The encryption key size used for encrypting this link is too short.
    public static let insufficientEncryptionKeySize = ATTErrorCode(0x0C)
    /// The attribute value length is invalid for the operation.
    public static let invalidAttributeValueLength = ATTErrorCode(0x0D)
    /// The request encountered an unlikely error and could not be completed.
    public static let unlikelyError = ATTErrorCode(0x0E)
    /// The attribute requires encryption before it can be read or written.
    public static let insufficientEncryption = ATTErrorCode(0x0F)
    /// The attribute type is not a supported grouping attribute as defined by a higher-layer specification.
    public static let unsupportedGroupType = ATTErrorCode(0x10)
    /// Insufficient resources to complete the request.
    public static let insufficientResources = ATTErrorCode(0x11)
    /// The server requests the client to rediscover the database.
    public static let databaseOutOfSync = ATTErrorCode(0x12)
    /// The attribute parameter value was not allowed.
    public static let valueNotAllowed = ATTErrorCode(0x13)
    /// Common profile error (Supplement Part B §1.2): a write request was rejected.
    public static let writeRequestRejected = ATTErrorCode(0xFC)
    /// Common profile error: the Client Characteristic Configuration Descriptor is not configured as required.
    public static let cccdImproperlyConfigured = ATTErrorCode(0xFD)
    /// Common profile error: a request is already in progress.
    public static let procedureAlreadyInProgress = ATTErrorCode(0xFE)
    /// Common profile error: the attribute value is out of range.
    public static let outOfRange = ATTErrorCode(0xFF)

    /// The range reserved for errors defined by a higher-layer (application) specification.
    public static let applicationErrorRange: ClosedRange<UInt8> = 0x80...0x9F

    /// Whether this is an application error (0x80...0x9F), whose meaning the profile defines.
    public var isApplicationError: Bool { Self.applicationErrorRange.contains(rawValue) }

    /// The spec name ("Invalid Handle"), or nil for application errors and codes this module does not name.
    public var name: String? {
        switch rawValue {
        case 0x01: "Invalid Handle"
        case 0x02: "Read Not Permitted"
        case 0x03: "Write Not Permitted"
        case 0x04: "Invalid PDU"
        case 0x05: "Insufficient Authentication"
        case 0x06: "Request Not Supported"
        case 0x07: "Invalid Offset"
        case 0x08: "Insufficient Authorization"
        case 0x09: "Prepare Queue Full"
        case 0x0A: "Attribute Not Found"
        case 0x0B: "Attribute Not Long"
        case 0x0C: "Encryption Key Size Too Short"
        case 0x0D: "Invalid Attribute Value Length"
        case 0x0E: "Unlikely Error"
        case 0x0F: "Insufficient Encryption"
        case 0x10: "Unsupported Group Type"
        case 0x11: "Insufficient Resources"
        case 0x12: "Database Out Of Sync"
        case 0x13: "Value Not Allowed"
        case 0xFC: "Write Request Rejected"
        case 0xFD: "Client Characteristic Configuration Descriptor Improperly Configured"
        case 0xFE: "Procedure Already In Progress"
        case 0xFF: "Out Of Range"
        default: nil
        }
    }

    /// "Invalid Handle (0x01)", "Application Error 0x80", or "Unknown error 0x42".
    public var description: String {
        if let name { return "\(name) (\(hex2(rawValue)))" }
        if isApplicationError { return "Application Error \(hex2(rawValue))" }
        return "Unknown error \(hex2(rawValue))"
    }
}
