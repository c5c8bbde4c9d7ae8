import BLECore

/// The two steps of Initialize DFU Parameters (`ble_dfu.h` DFU_INIT_RX / DFU_INIT_COMPLETE). Open code space.
public struct LegacyInitStep: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// `02 00`: the init packet follows on the Packet characteristic.
    public static let receive = LegacyInitStep(rawValue: 0x00)
    /// `02 01`: the init packet is complete; the device checks it and answers `10 02 <status>`.
    public static let complete = LegacyInitStep(rawValue: 0x01)
    public var description: String {
        switch rawValue {
        case 0x00: "receive"
        case 0x01: "complete"
        default: "step 0x\(hex2(rawValue))"
        }
    }
}

/// A request written to the Legacy DFU Control Point (`…1531`) with a Write Request.
///
/// Layouts (little-endian; nRF5 SDK 11 `ble_dfu.c`, legacy-dfu.md §3.1):
///
///     Start DFU                    01 <image type u8>      answered (10 01 st) only after the 12-byte sizes on Packet
///     Start DFU, SDK ≤ 6.0         01                      then a 4-byte application size on Packet
///     Initialize DFU Parameters    02 <step u8>            00 = the init packet follows, 01 = complete (→ 10 02 st)
///     Initialize, SDK ≤ 6.1        02                      then the 2-byte CRC on Packet (→ 10 02 st)
///     Receive Firmware Image       03                      data follows on Packet; 10 03 01 after the last byte
///     Validate                     04                      → 10 04 st
///     Activate and Reset           05                      no answer: the device disconnects and activates
///     Reset                        06                      no answer: the device disconnects and resets
///     Report Received Image Size   07                      → 10 07 01 <bytes u32>
///     PRN Request                  08 <n u16>              a receipt every n accepted packets; 0 = off
///
/// Decoding is strict (trailing bytes after a fixed-size request are malformed); a bootloader is lenient, so the
/// simulator parses writes its own way, as `ble_dfu.c` does.
public enum LegacyRequest: Hashable, Sendable, CustomStringConvertible {
    case startDFU(LegacyImageType)
    /// The SDK ≤ 6.0 Start without an image type (application only, 4-byte size).
    case startDFUWithoutType
    case initialize(LegacyInitStep)
    /// The SDK ≤ 6.1 Initialize without a step (a 2-byte CRC follows).
    case initializeWithoutStep
    case receiveFirmwareImage
    case validate
    case activateAndReset
    case reset
    case reportReceivedImageSize
    case packetReceiptRequest(UInt16)
    /// Any other opcode, kept with its parameters.
    case unknown(opcode: LegacyOpcode, parameters: [UInt8])

    public var opcode: LegacyOpcode {
        switch self {
        case .startDFU, .startDFUWithoutType: .startDFU
        case .initialize, .initializeWithoutStep: .initialize
        case .receiveFirmwareImage: .receiveFirmwareImage
        case .validate: .validate
        case .activateAndReset: .activateAndReset
        case .reset: .reset
        case .reportReceivedImageSize: .reportReceivedImageSize
        case .packetReceiptRequest: .packetReceiptRequest
        case .unknown(let opcode, _): opcode
        }
    }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 3)
        w.write(opcode.rawValue)
        switch self {
        case .startDFU(let type): w.write(type.rawValue)
        case .initialize(let step): w.write(step.rawValue)
        case .packetReceiptRequest(let n): w.write(n)
        case .unknown(_, let parameters): w.write(contentsOf: parameters)
        case .startDFUWithoutType, .initializeWithoutStep, .receiveFirmwareImage, .validate, .activateAndReset, .reset,
            .reportReceivedImageSize:
            break
        }
        return w.bytes
    }

    public init(decoding bytes: [UInt8]) throws(LegacyDecodingError) {
        var r = ByteReader(bytes)
        guard let first = r.peekUInt8() else { throw LegacyDecodingError(.empty, "control point request: no bytes") }
        _ = try? r.readUInt8("opcode")
        let opcode = LegacyOpcode(rawValue: first)
        do {
            switch opcode {
            case .startDFU:
                self = r.isAtEnd ? .startDFUWithoutType : .startDFU(LegacyImageType(rawValue: try r.readUInt8("type")))
            case .initialize:
                self = r.isAtEnd ? .initializeWithoutStep : .initialize(LegacyInitStep(rawValue: try r.readUInt8("step")))
            case .receiveFirmwareImage: self = .receiveFirmwareImage
            case .validate: self = .validate
            case .activateAndReset: self = .activateAndReset
            case .reset: self = .reset
            case .reportReceivedImageSize: self = .reportReceivedImageSize
            case .packetReceiptRequest: self = .packetReceiptRequest(try r.readUInt16("number of packets"))
            default: self = .unknown(opcode: opcode, parameters: r.readRemaining())
            }
        } catch {
            throw LegacyDecodingError(.truncated, "control point request \(opcode): \(error)")
        }
        guard r.isAtEnd else {
            throw LegacyDecodingError(.malformed, "control point request \(opcode): \(r.remainingCount) trailing byte(s)")
        }
    }

    public var description: String {
        switch self {
        case .startDFU(let type): "Start DFU (\(type))"
        case .startDFUWithoutType: "Start DFU (no type, SDK ≤ 6.0)"
        case .initialize(let step): "Initialize DFU Parameters (\(step))"
        case .initializeWithoutStep: "Initialize DFU Parameters (SDK ≤ 6.1)"
        case .packetReceiptRequest(let n): n == 0 ? "PRN off" : "PRN every \(n) packets"
        case .unknown(let opcode, let parameters): "\(opcode) \(parameters.hexString)"
        default: opcode.name ?? opcode.description
        }
    }
}

/// The sizes written to the Packet characteristic after Start DFU: three u32 (SoftDevice, bootloader, application),
/// 12 bytes (`dfu_transport_ble.c start_data_process`: SD_IMAGE_SIZE_OFFSET 0, BL 4, APP 8). SDK ≤ 6.0 takes
/// only the application size (4 bytes, ``encodedApplicationOnly``).
///
///     00 00 00 00   00 00 00 00   3C 56 00 00        SoftDevice 0, bootloader 0, application 22076
public struct LegacyStartSizes: Hashable, Sendable, CustomStringConvertible {
    public var softdevice: UInt32
    public var bootloader: UInt32
    public var application: UInt32

    public init(softdevice: UInt32 = 0, bootloader: UInt32 = 0, application: UInt32 = 0) {
        self.softdevice = softdevice
        self.bootloader = bootloader
        self.application = application
    }

    /// The image type these sizes announce (the bits of the non-zero sizes).
    public var imageType: LegacyImageType {
        var type: LegacyImageType = []
        if softdevice > 0 { type.insert(.softdevice) }
        if bootloader > 0 { type.insert(.bootloader) }
        if application > 0 { type.insert(.application) }
        return type
    }

    public var total: UInt64 { UInt64(softdevice) + UInt64(bootloader) + UInt64(application) }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 12)
        w.write(softdevice)
        w.write(bootloader)
        w.write(application)
        return w.bytes
    }

    /// The SDK ≤ 6.0 form: the application size alone.
    public var encodedApplicationOnly: [UInt8] {
        var w = ByteWriter(capacity: 4)
        w.write(application)
        return w.bytes
    }

    public init(decoding bytes: [UInt8]) throws(LegacyDecodingError) {
        var r = ByteReader(bytes)
        do {
            softdevice = try r.readUInt32("SoftDevice size")
            bootloader = try r.readUInt32("bootloader size")
            application = try r.readUInt32("application size")
        } catch {
            throw LegacyDecodingError(bytes.isEmpty ? .empty : .truncated, "start sizes: \(error)")
        }
        guard r.isAtEnd else { throw LegacyDecodingError(.malformed, "start sizes: \(bytes.count) bytes, expected 12") }
    }

    public var description: String { "SoftDevice \(softdevice), bootloader \(bootloader), application \(application)" }
}
