import BLECore

/// UUIDs of the Legacy DFU service (nRF5 SDK ≤ 11 `ble_dfu.h`; InfiniTime `DfuService.h`): the 16-bit values sit in
/// the vendor base `0000xxxx-1212-EFDE-1523-785FEABCD123` (legacy-dfu.md §2).
public enum LegacyDFUUUID {
    /// The DFU service, in the bootloader and in applications that offer the buttonless jump.
    public static let service = legacy(0x1530)
    /// Control Point: Write (authorized) + Notify, `max_len` 23 (`dfu_ctrl_pt_add`).
    public static let controlPoint = legacy(0x1531)
    /// Packet: Write Without Response only, `max_len` 20 (`dfu_pkt_char_add`, MAX_DFU_PKT_LEN).
    public static let packet = legacy(0x1532)
    /// Status report: defined in `ble_dfu.h`, never added to the table by any SDK.
    public static let statusReport = legacy(0x1533)
    /// DFU Version (`dfu_rev_char_add`): Read, 2 bytes LE; absent on SDK ≤ 6.1 bootloaders.
    public static let version = legacy(0x1534)

    static func legacy(_ short: UInt16) -> BluetoothUUID {
        BluetoothUUID(bigEndianBytes: [
            0x00, 0x00, UInt8(short >> 8), UInt8(short & 0xFF), 0x12, 0x12, 0xEF, 0xDE, 0x15, 0x23, 0x78, 0x5F, 0xEA,
            0xBC, 0xD1, 0x23,
        ]) ?? BluetoothUUID(short)
    }
}

/// A Legacy DFU Control Point opcode (`ble_dfu.h` `OP_CODE_*`). Open: unknown opcodes survive and print.
public struct LegacyOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let startDFU = LegacyOpcode(rawValue: 0x01)
    public static let initialize = LegacyOpcode(rawValue: 0x02)
    public static let receiveFirmwareImage = LegacyOpcode(rawValue: 0x03)
    public static let validate = LegacyOpcode(rawValue: 0x04)
    public static let activateAndReset = LegacyOpcode(rawValue: 0x05)
    public static let reset = LegacyOpcode(rawValue: 0x06)
    public static let reportReceivedImageSize = LegacyOpcode(rawValue: 0x07)
    public static let packetReceiptRequest = LegacyOpcode(rawValue: 0x08)
    /// First byte of every response notification.
    public static let response = LegacyOpcode(rawValue: 0x10)
    /// First byte of a Packet Receipt Notification.
    public static let packetReceipt = LegacyOpcode(rawValue: 0x11)

    public var name: String? {
        switch rawValue {
        case 0x01: "Start DFU"
        case 0x02: "Initialize DFU Parameters"
        case 0x03: "Receive Firmware Image"
        case 0x04: "Validate"
        case 0x05: "Activate and Reset"
        case 0x06: "Reset"
        case 0x07: "Report Received Image Size"
        case 0x08: "Packet Receipt Notification Request"
        case 0x10: "Response"
        case 0x11: "Packet Receipt Notification"
        default: nil
        }
    }

    public var description: String { "\(name ?? "Unknown") (0x\(hex2(rawValue)))" }
}

/// The status byte of a response (`ble_dfu_resp_val_t`). Open code space: unknown values survive and print.
public struct LegacyStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let success = LegacyStatus(rawValue: 0x01)
    /// Start while not idle, init after data began, data before init, Validate before all data.
    public static let invalidState = LegacyStatus(rawValue: 0x02)
    /// Unknown opcode, sizes packet of the wrong length, app with SD/BL, sizes or data not word-sized.
    public static let notSupported = LegacyStatus(rawValue: 0x03)
    /// Bootloader too big, image bigger than the bank, data beyond the announced size.
    public static let dataSizeExceedsLimit = LegacyStatus(rawValue: 0x04)
    /// Validate: the image's CRC (or hash) does not match the init packet.
    public static let crcError = LegacyStatus(rawValue: 0x05)
    /// Everything else: init packet refused, no receive buffer, flash queue full.
    public static let operationFailed = LegacyStatus(rawValue: 0x06)

    public var name: String? {
        switch rawValue {
        case 0x01: "success"
        case 0x02: "invalid state"
        case 0x03: "not supported"
        case 0x04: "data size exceeds limit"
        case 0x05: "CRC error"
        case 0x06: "operation failed"
        default: nil
        }
    }

    public var description: String { "\(name ?? "unknown status") (0x\(hex2(rawValue)))" }
}

/// The image type of Start DFU: a bit mask (`dfu_types.h` DFU_UPDATE_SD / _BL / _APP). SoftDevice + bootloader is
/// 0x03; the application is always sent alone.
public struct LegacyImageType: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let softdevice = LegacyImageType(rawValue: 0x01)
    public static let bootloader = LegacyImageType(rawValue: 0x02)
    public static let application = LegacyImageType(rawValue: 0x04)

    public var description: String {
        var names: [String] = []
        if contains(.softdevice) { names.append("SoftDevice") }
        if contains(.bootloader) { names.append("bootloader") }
        if contains(.application) { names.append("application") }
        let unknown = rawValue & ~0x07
        if unknown != 0 || names.isEmpty { names.append("0x\(hex2(rawValue))") }
        return names.joined(separator: "+")
    }
}

/// The value of the DFU Version characteristic: minor version in the low byte, major in the high byte
/// (`dfu_rev_char_add`). `0.1` is an application with the buttonless entry (`ble_app_hrs`, Bluefruit `BLEDfu`);
/// bootloaders report `0.5` (SDK 7), `0.6` (SDK 8), `0.7`, `0.8` (SDK 9–11, Adafruit, InfiniTime's in-app service).
public struct LegacyDFUVersion: RawRepresentable, Hashable, Sendable, CustomStringConvertible, Codable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(major: UInt8, minor: UInt8) { rawValue = UInt16(major) << 8 | UInt16(minor) }

    /// An application exposing the buttonless entry.
    public static let application = LegacyDFUVersion(rawValue: 0x0001)
    /// The SDK 9–11 bootloaders, Adafruit's and InfiniTime's service (`DFU_REVISION`).
    public static let sdk11 = LegacyDFUVersion(rawValue: 0x0008)

    public var major: UInt8 { UInt8(rawValue >> 8) }
    public var minor: UInt8 { UInt8(truncatingIfNeeded: rawValue) }
    /// 0.1: the application, which enters the bootloader on Start DFU.
    public var isApplication: Bool { self == .application }
    /// 0.5 and later bootloaders require the extended init packet (`02 00` … `02 01`).
    public var requiresExtendedInitPacket: Bool { major > 0 || minor >= 5 }

    /// The characteristic value: 2 bytes, little-endian.
    public var encoded: [UInt8] { [minor, major] }

    public init(decoding bytes: [UInt8]) throws(LegacyDecodingError) {
        var r = ByteReader(bytes)
        do {
            rawValue = try r.readUInt16("DFU version")
        } catch {
            throw LegacyDecodingError(bytes.isEmpty ? .empty : .truncated, "DFU version: \(error)")
        }
        guard r.isAtEnd else { throw LegacyDecodingError(.malformed, "DFU version: \(bytes.count) bytes, expected 2") }
    }

    public var description: String { "\(major).\(minor)" }
}

/// Malformed or truncated Legacy DFU message. Equality is on ``code``.
public struct LegacyDecodingError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let empty = Code(rawValue: "empty")
        /// Fewer bytes than the layout needs: the start of a valid message.
        public static let truncated = Code(rawValue: "truncated")
        /// Bytes no valid message starts with, or trailing bytes.
        public static let malformed = Code(rawValue: "malformed")
        public var description: String { rawValue }
    }

    public var code: Code
    public var reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// One line for people (``CodedError/message``).
    public var message: String { reason }
}

func hex2(_ value: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(value >> 4)], digits[Int(value & 0x0F)]])
}

func hex4(_ value: UInt16) -> String { hex2(UInt8(value >> 8)) + hex2(UInt8(truncatingIfNeeded: value)) }
