import BLECore

/// An HCI status code (Core Vol 1 Part F). Open: unknown codes survive and print as hex.
public struct HCIStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let success = HCIStatus(rawValue: 0x00)
    public static let unknownCommand = HCIStatus(rawValue: 0x01)
    public static let commandDisallowed = HCIStatus(rawValue: 0x0C)
    public static let invalidParameters = HCIStatus(rawValue: 0x12)
    public static let unsupportedFeature = HCIStatus(rawValue: 0x11)

    public var description: String {
        let hex = "0x" + (rawValue < 0x10 ? "0" : "") + String(rawValue, radix: 16, uppercase: true)
        switch self {
        case .success: return "success (\(hex))"
        case .unknownCommand: return "unknown HCI command (\(hex))"
        case .commandDisallowed: return "command disallowed (\(hex))"
        case .unsupportedFeature: return "unsupported feature or parameter value (\(hex))"
        case .invalidParameters: return "invalid HCI command parameters (\(hex))"
        default: return "HCI status \(hex)"
        }
    }
}

/// One HCI command packet as written to a raw HCI socket (Core Vol 4 Part E 5.4.1, H:4 packet indicator first):
///
///     01 | opcode u16 LE (OCF | OGF << 10) | parameter length u8 | parameters
public struct HCICommand: Hashable, Sendable {
    public var opcode: UInt16
    public var parameters: [UInt8]

    public init(opcode: UInt16, parameters: [UInt8] = []) {
        self.opcode = opcode
        self.parameters = parameters
    }

    /// OGF 0x08 (LE controller commands).
    public static let leSetScanParametersOpcode: UInt16 = 0x200B
    public static let leSetScanEnableOpcode: UInt16 = 0x200C
    public static let leSetExtendedScanParametersOpcode: UInt16 = 0x2041
    public static let leSetExtendedScanEnableOpcode: UInt16 = 0x2042

    /// The bytes for `write(2)` on a raw HCI socket.
    public var packet: [UInt8] {
        var writer = ByteWriter(capacity: 4 + parameters.count)
        writer.write(UInt8(0x01))
        writer.write(opcode)
        writer.write(UInt8(truncatingIfNeeded: parameters.count))
        writer.write(contentsOf: parameters)
        return writer.bytes
    }

    /// LE Set Scan Parameters (0x200B), 7 parameter bytes:
    ///
    ///     type u8 (0 passive, 1 active) | interval u16 | window u16 (×0.625 ms) | own_addr_type u8 | filter_policy u8
    public static func leSetScanParameters(
        active: Bool, interval: UInt16 = 0x0010, window: UInt16 = 0x0010, ownAddressType: UInt8 = 0, filterPolicy: UInt8 = 0
    ) -> HCICommand {
        var writer = ByteWriter(capacity: 7)
        writer.write(UInt8(active ? 1 : 0))
        writer.write(interval)
        writer.write(window)
        writer.write(ownAddressType)
        writer.write(filterPolicy)
        return HCICommand(opcode: leSetScanParametersOpcode, parameters: writer.bytes)
    }

    /// LE Set Scan Enable (0x200C): `enable u8 | filter_duplicates u8`.
    public static func leSetScanEnable(_ enable: Bool, filterDuplicates: Bool = false) -> HCICommand {
        HCICommand(opcode: leSetScanEnableOpcode, parameters: [enable ? 1 : 0, filterDuplicates ? 1 : 0])
    }

    /// LE Set Extended Scan Parameters (0x2041) for the LE 1M PHY only, 8 parameter bytes:
    ///
    ///     own_addr_type u8 | filter_policy u8 | scanning_phys u8 (bit 0 = 1M) | type u8 | interval u16 | window u16
    public static func leSetExtendedScanParameters(
        active: Bool, interval: UInt16 = 0x0010, window: UInt16 = 0x0010, ownAddressType: UInt8 = 0, filterPolicy: UInt8 = 0
    ) -> HCICommand {
        var writer = ByteWriter(capacity: 8)
        writer.write(ownAddressType)
        writer.write(filterPolicy)
        writer.write(UInt8(0x01))
        writer.write(UInt8(active ? 1 : 0))
        writer.write(interval)
        writer.write(window)
        return HCICommand(opcode: leSetExtendedScanParametersOpcode, parameters: writer.bytes)
    }

    /// LE Set Extended Scan Enable (0x2042), 6 parameter bytes:
    ///
    ///     enable u8 | filter_duplicates u8 | duration u16 (×10 ms, 0 = until disabled) | period u16 (×1.28 s)
    public static func leSetExtendedScanEnable(_ enable: Bool, filterDuplicates: Bool = false) -> HCICommand {
        var writer = ByteWriter(capacity: 6)
        writer.write(UInt8(enable ? 1 : 0))
        writer.write(UInt8(filterDuplicates ? 1 : 0))
        writer.write(UInt16(0))
        writer.write(UInt16(0))
        return HCICommand(opcode: leSetExtendedScanEnableOpcode, parameters: writer.bytes)
    }
}
