/// `dfu.FwType`: the kind of image an init command announces. Open: unknown values survive and print.
public struct FirmwareType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let application = FirmwareType(rawValue: 0)
    public static let softdevice = FirmwareType(rawValue: 1)
    public static let bootloader = FirmwareType(rawValue: 2)
    public static let softdeviceBootloader = FirmwareType(rawValue: 3)
    public static let externalApplication = FirmwareType(rawValue: 4)

    public var description: String {
        switch self {
        case .application: "APPLICATION"
        case .softdevice: "SOFTDEVICE"
        case .bootloader: "BOOTLOADER"
        case .softdeviceBootloader: "SOFTDEVICE_BOOTLOADER"
        case .externalApplication: "EXTERNAL_APPLICATION"
        default: "FwType(\(rawValue))"
        }
    }
}

/// `dfu.HashType`. Open.
public struct HashType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let noHash = HashType(rawValue: 0)
    public static let crc = HashType(rawValue: 1)
    public static let sha128 = HashType(rawValue: 2)
    public static let sha256 = HashType(rawValue: 3)
    public static let sha512 = HashType(rawValue: 4)

    public var description: String {
        switch self {
        case .noHash: "NO_HASH"
        case .crc: "CRC"
        case .sha128: "SHA128"
        case .sha256: "SHA256"
        case .sha512: "SHA512"
        default: "HashType(\(rawValue))"
        }
    }
}

/// `dfu.ValidationType`: how the bootloader validates an image at boot. Open.
public struct ValidationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let noValidation = ValidationType(rawValue: 0)
    public static let crc = ValidationType(rawValue: 1)
    public static let sha256 = ValidationType(rawValue: 2)
    public static let ecdsaP256Sha256 = ValidationType(rawValue: 3)

    /// nrfutil's option spelling (`--app-boot-validation`), e.g. "VALIDATE_GENERATED_CRC".
    public var description: String {
        switch self {
        case .noValidation: "NO_VALIDATION"
        case .crc: "VALIDATE_GENERATED_CRC"
        case .sha256: "VALIDATE_GENERATED_SHA256"
        case .ecdsaP256Sha256: "VALIDATE_ECDSA_P256_SHA256"
        default: "ValidationType(\(rawValue))"
        }
    }

    /// Parses nrfutil's names (and `VALIDATE_SHA256`, the proto name).
    public init?(name: String) {
        switch name.uppercased() {
        case "NO_VALIDATION": self = .noValidation
        case "VALIDATE_GENERATED_CRC": self = .crc
        case "VALIDATE_GENERATED_SHA256", "VALIDATE_SHA256": self = .sha256
        case "VALIDATE_ECDSA_P256_SHA256": self = .ecdsaP256Sha256
        default: return nil
        }
    }
}

/// `dfu.Hash`: `{1 hash_type (varint), 2 hash (bytes)}`. nrfutil stores the SHA-256 digest byte-reversed.
public struct ImageHash: Hashable, Sendable {
    public var type: HashType
    public var bytes: [UInt8]
    public init(type: HashType, bytes: [UInt8]) {
        self.type = type
        self.bytes = bytes
    }
}

/// `dfu.BootValidation`: `{1 type (varint), 2 bytes (bytes)}`. Bytes are empty for CRC/SHA-256 and a 64-byte
/// signature (r and s each byte-reversed) for ECDSA.
public struct BootValidation: Hashable, Sendable {
    public var type: ValidationType
    public var bytes: [UInt8]
    public init(type: ValidationType, bytes: [UInt8] = []) {
        self.type = type
        self.bytes = bytes
    }
}
