/// A generic MCUmgr result code (`rc`; Zephyr `mgmt_defines.h`), as SMP v1 answers every error and v2 answers
/// errors that belong to no group (smp-mcuboot.md §2.3). Open: unknown codes survive and print as numbers.
public struct SMPReturnCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let ok = SMPReturnCode(rawValue: 0)
    public static let unknown = SMPReturnCode(rawValue: 1)
    public static let noMemory = SMPReturnCode(rawValue: 2)
    public static let invalidValue = SMPReturnCode(rawValue: 3)
    public static let timeout = SMPReturnCode(rawValue: 4)
    public static let noEntry = SMPReturnCode(rawValue: 5)
    public static let badState = SMPReturnCode(rawValue: 6)
    public static let messageTooLarge = SMPReturnCode(rawValue: 7)
    public static let notSupported = SMPReturnCode(rawValue: 8)
    public static let corrupt = SMPReturnCode(rawValue: 9)
    public static let busy = SMPReturnCode(rawValue: 10)
    public static let accessDenied = SMPReturnCode(rawValue: 11)
    public static let unsupportedTooOld = SMPReturnCode(rawValue: 12)
    public static let unsupportedTooNew = SMPReturnCode(rawValue: 13)

    static let names: [Int: String] = [
        0: "EOK", 1: "EUNKNOWN", 2: "ENOMEM", 3: "EINVAL", 4: "ETIMEOUT", 5: "ENOENT", 6: "EBADSTATE",
        7: "EMSGSIZE", 8: "ENOTSUP", 9: "ECORRUPT", 10: "EBUSY", 11: "EACCESSDENIED", 12: "UNSUPPORTED_TOO_OLD",
        13: "UNSUPPORTED_TOO_NEW",
    ]

    /// `MGMT_ERR_ENOTSUP (8)`, as Zephyr names it.
    public var description: String { "MGMT_ERR_\(Self.names[rawValue] ?? "\(rawValue)") (\(rawValue))" }
}

/// An SMP v2 group error (`{"err": {"group": g, "rc": r}}`): the group's own code.
public struct SMPGroupError: Hashable, Sendable, CustomStringConvertible {
    public var group: SMPGroup
    public var rc: Int

    public init(group: SMPGroup, rc: Int) {
        self.group = group
        self.rc = rc
    }

    public init(_ code: ImageManagementCode) { self.init(group: .image, rc: code.rawValue) }

    /// `IMG_MGMT_ERR_CURRENT_VERSION_IS_NEWER (27)` for a known group and code, else `group 9 rc 4`.
    public var description: String {
        switch group {
        case .image: return ImageManagementCode(rawValue: rc).description
        case .os: return OSManagementCode(rawValue: rc).description
        default: return "group \(group.rawValue) rc \(rc)"
        }
    }
}

/// Image management group codes (`img_mgmt.h`), with their SMP v1 translation
/// (`img_mgmt_translate_error_code`; smp-mcuboot.md §2.3).
public struct ImageManagementCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let ok = ImageManagementCode(rawValue: 0)
    public static let unknown = ImageManagementCode(rawValue: 1)
    public static let flashConfigQueryFail = ImageManagementCode(rawValue: 2)
    public static let noImage = ImageManagementCode(rawValue: 3)
    public static let noTLVs = ImageManagementCode(rawValue: 4)
    public static let invalidTLV = ImageManagementCode(rawValue: 5)
    public static let tlvMultipleHashesFound = ImageManagementCode(rawValue: 6)
    public static let tlvInvalidSize = ImageManagementCode(rawValue: 7)
    public static let hashNotFound = ImageManagementCode(rawValue: 8)
    public static let noFreeSlot = ImageManagementCode(rawValue: 9)
    public static let flashOpenFailed = ImageManagementCode(rawValue: 10)
    public static let flashReadFailed = ImageManagementCode(rawValue: 11)
    public static let flashWriteFailed = ImageManagementCode(rawValue: 12)
    public static let flashEraseFailed = ImageManagementCode(rawValue: 13)
    public static let invalidSlot = ImageManagementCode(rawValue: 14)
    public static let noFreeMemory = ImageManagementCode(rawValue: 15)
    public static let flashContextAlreadySet = ImageManagementCode(rawValue: 16)
    public static let flashContextNotSet = ImageManagementCode(rawValue: 17)
    public static let flashAreaDeviceNull = ImageManagementCode(rawValue: 18)
    public static let invalidPageOffset = ImageManagementCode(rawValue: 19)
    public static let invalidOffset = ImageManagementCode(rawValue: 20)
    public static let invalidLength = ImageManagementCode(rawValue: 21)
    public static let invalidImageHeader = ImageManagementCode(rawValue: 22)
    public static let invalidImageHeaderMagic = ImageManagementCode(rawValue: 23)
    public static let invalidHash = ImageManagementCode(rawValue: 24)
    public static let invalidFlashAddress = ImageManagementCode(rawValue: 25)
    public static let versionGetFailed = ImageManagementCode(rawValue: 26)
    public static let currentVersionIsNewer = ImageManagementCode(rawValue: 27)
    public static let imageAlreadyPending = ImageManagementCode(rawValue: 28)
    public static let invalidImageVectorTable = ImageManagementCode(rawValue: 29)
    public static let invalidImageTooLarge = ImageManagementCode(rawValue: 30)
    public static let invalidImageDataOverrun = ImageManagementCode(rawValue: 31)
    public static let imageConfirmationDenied = ImageManagementCode(rawValue: 32)
    public static let imageSettingTestToActiveDenied = ImageManagementCode(rawValue: 33)
    public static let activeSlotNotKnown = ImageManagementCode(rawValue: 34)

    static let names = [
        "OK", "UNKNOWN", "FLASH_CONFIG_QUERY_FAIL", "NO_IMAGE", "NO_TLVS", "INVALID_TLV", "TLV_MULTIPLE_HASHES_FOUND",
        "TLV_INVALID_SIZE", "HASH_NOT_FOUND", "NO_FREE_SLOT", "FLASH_OPEN_FAILED", "FLASH_READ_FAILED",
        "FLASH_WRITE_FAILED", "FLASH_ERASE_FAILED", "INVALID_SLOT", "NO_FREE_MEMORY", "FLASH_CONTEXT_ALREADY_SET",
        "FLASH_CONTEXT_NOT_SET", "FLASH_AREA_DEVICE_NULL", "INVALID_PAGE_OFFSET", "INVALID_OFFSET", "INVALID_LENGTH",
        "INVALID_IMAGE_HEADER", "INVALID_IMAGE_HEADER_MAGIC", "INVALID_HASH", "INVALID_FLASH_ADDRESS",
        "VERSION_GET_FAILED", "CURRENT_VERSION_IS_NEWER", "IMAGE_ALREADY_PENDING", "INVALID_IMAGE_VECTOR_TABLE",
        "INVALID_IMAGE_TOO_LARGE", "INVALID_IMAGE_DATA_OVERRUN", "IMAGE_CONFIRMATION_DENIED",
        "IMAGE_SETTING_TEST_TO_ACTIVE_DENIED", "ACTIVE_SLOT_NOT_KNOWN",
    ]

    public var description: String {
        let name = Self.names.indices.contains(rawValue) ? Self.names[rawValue] : "\(rawValue)"
        return "IMG_MGMT_ERR_\(name) (\(rawValue))"
    }

    /// The generic code an SMP v1 request gets instead (`img_mgmt_translate_error_code`).
    public var smpV1Code: SMPReturnCode {
        switch rawValue {
        case 0: .ok
        case 3, 4: .noEntry
        case 9, 27, 28: .badState
        case 14, 19, 20, 21, 22, 24, 25: .invalidValue
        case 15: .noMemory
        default: .unknown
        }
    }
}

/// OS management group codes (`os_mgmt.h`).
public struct OSManagementCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let ok = OSManagementCode(rawValue: 0)
    public static let unknown = OSManagementCode(rawValue: 1)
    public static let invalidFormat = OSManagementCode(rawValue: 2)
    public static let queryYieldsNoAnswer = OSManagementCode(rawValue: 3)

    public var description: String {
        let names = ["OK", "UNKNOWN", "INVALID_FORMAT", "QUERY_YIELDS_NO_ANSWER"]
        let name = names.indices.contains(rawValue) ? names[rawValue] : "\(rawValue)"
        return "OS_MGMT_ERR_\(name) (\(rawValue))"
    }
}
