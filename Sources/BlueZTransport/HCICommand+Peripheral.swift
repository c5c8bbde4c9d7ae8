import BLECore

/// The HCI commands of the peripheral role (legacy advertising, Core Vol 4 Part E 7.8.4-7.8.9) and of link tuning on
/// a central connection (7.8.18, 7.8.33, 7.8.47, 7.8.49), plus Disconnect (7.1.6). Every builder documents its
/// parameter bytes; all multi-byte fields are little-endian.
extension HCICommand {
    /// OGF 0x01 (link control).
    public static let disconnectOpcode: UInt16 = 0x0406
    /// OGF 0x08 (LE controller).
    public static let leSetRandomAddressOpcode: UInt16 = 0x2005
    public static let leSetAdvertisingParametersOpcode: UInt16 = 0x2006
    public static let leSetAdvertisingDataOpcode: UInt16 = 0x2008
    public static let leSetScanResponseDataOpcode: UInt16 = 0x2009
    public static let leSetAdvertisingEnableOpcode: UInt16 = 0x200A
    public static let leConnectionUpdateOpcode: UInt16 = 0x2013
    public static let leSetDataLengthOpcode: UInt16 = 0x2022
    public static let leReadPHYOpcode: UInt16 = 0x2030
    public static let leSetPHYOpcode: UInt16 = 0x2032

    /// The legacy advertising payload limit (advertising data and scan response data each).
    public static let legacyAdvertisingDataLimit = 31

    /// Disconnect (0x0406), 3 parameter bytes: `handle u16 | reason u8` (0x13 remote user terminated).
    public static func disconnect(handle: UInt16, reason: UInt8 = 0x13) -> HCICommand {
        var writer = ByteWriter(capacity: 3)
        writer.write(handle)
        writer.write(reason)
        return HCICommand(opcode: disconnectOpcode, parameters: writer.bytes)
    }

    /// LE Set Random Address (0x2005), 6 parameter bytes: the address, least significant byte first.
    public static func leSetRandomAddress(_ address: BluetoothAddress) -> HCICommand {
        HCICommand(opcode: leSetRandomAddressOpcode, parameters: address.littleEndianBytes)
    }

    /// LE Set Advertising Parameters (0x2006), 15 parameter bytes:
    ///
    ///     interval_min u16 | interval_max u16 (×0.625 ms) | type u8 (0 ADV_IND) | own_addr_type u8 (0 public,
    ///     1 random) | peer_addr_type u8 | peer_addr[6] | channel_map u8 (0x07 = 37, 38, 39) | filter_policy u8
    public static func leSetAdvertisingParameters(
        intervalMin: UInt16 = 0x00A0, intervalMax: UInt16 = 0x00A0, type: UInt8 = 0x00, ownAddressType: UInt8,
        channelMap: UInt8 = 0x07, filterPolicy: UInt8 = 0x00
    ) -> HCICommand {
        var writer = ByteWriter(capacity: 15)
        writer.write(intervalMin)
        writer.write(intervalMax)
        writer.write(type)
        writer.write(ownAddressType)
        writer.write(UInt8(0))  // peer address type (directed advertising only)
        writer.write(contentsOf: [UInt8](repeating: 0, count: 6))
        writer.write(channelMap)
        writer.write(filterPolicy)
        return HCICommand(opcode: leSetAdvertisingParametersOpcode, parameters: writer.bytes)
    }

    /// LE Set Advertising Data (0x2008), 32 parameter bytes: `length u8 | data[31]` (zero padded). Data longer
    /// than 31 bytes is cut (``AdvertisingPayload`` splits it first).
    public static func leSetAdvertisingData(_ data: [UInt8]) -> HCICommand {
        HCICommand(opcode: leSetAdvertisingDataOpcode, parameters: paddedAdvertisingData(data))
    }

    /// LE Set Scan Response Data (0x2009), 32 parameter bytes: `length u8 | data[31]` (zero padded).
    public static func leSetScanResponseData(_ data: [UInt8]) -> HCICommand {
        HCICommand(opcode: leSetScanResponseDataOpcode, parameters: paddedAdvertisingData(data))
    }

    /// LE Set Advertising Enable (0x200A): `enable u8`.
    public static func leSetAdvertisingEnable(_ enable: Bool) -> HCICommand {
        HCICommand(opcode: leSetAdvertisingEnableOpcode, parameters: [enable ? 1 : 0])
    }

    /// LE Connection Update (0x2013), 14 parameter bytes:
    ///
    ///     handle u16 | interval_min u16 | interval_max u16 (×1.25 ms) | latency u16 | supervision_timeout u16
    ///     (×10 ms) | min_ce_length u16 | max_ce_length u16 (×0.625 ms)
    public static func leConnectionUpdate(
        handle: UInt16, intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, supervisionTimeout: UInt16,
        minimumEventLength: UInt16 = 0, maximumEventLength: UInt16 = 0
    ) -> HCICommand {
        var writer = ByteWriter(capacity: 14)
        for value in [
            handle, intervalMin, intervalMax, latency, supervisionTimeout, minimumEventLength, maximumEventLength,
        ] {
            writer.write(value)
        }
        return HCICommand(opcode: leConnectionUpdateOpcode, parameters: writer.bytes)
    }

    /// LE Set Data Length (0x2022), 6 parameter bytes: `handle u16 | tx_octets u16 (27-251) | tx_time u16 (µs)`.
    public static func leSetDataLength(handle: UInt16, octets: UInt16 = 251, time: UInt16 = 2120) -> HCICommand {
        var writer = ByteWriter(capacity: 6)
        writer.write(handle)
        writer.write(octets)
        writer.write(time)
        return HCICommand(opcode: leSetDataLengthOpcode, parameters: writer.bytes)
    }

    /// LE Read PHY (0x2030), 2 parameter bytes: `handle u16`. Returns `status | handle u16 | tx_phy | rx_phy`.
    public static func leReadPHY(handle: UInt16) -> HCICommand {
        var writer = ByteWriter(capacity: 2)
        writer.write(handle)
        return HCICommand(opcode: leReadPHYOpcode, parameters: writer.bytes)
    }

    /// LE Set PHY (0x2032), 7 parameter bytes:
    ///
    ///     handle u16 | all_phys u8 (bit 0 no TX preference, bit 1 no RX preference) | tx_phys u8 | rx_phys u8
    ///     (bit 0 1M, bit 1 2M, bit 2 Coded) | phy_options u16
    public static func leSetPHY(handle: UInt16, transmit: UInt8 = 0x02, receive: UInt8 = 0x02) -> HCICommand {
        var writer = ByteWriter(capacity: 7)
        writer.write(handle)
        writer.write(UInt8(0))
        writer.write(transmit)
        writer.write(receive)
        writer.write(UInt16(0))
        return HCICommand(opcode: leSetPHYOpcode, parameters: writer.bytes)
    }

    private static func paddedAdvertisingData(_ data: [UInt8]) -> [UInt8] {
        let kept = Array(data.prefix(legacyAdvertisingDataLimit))
        return [UInt8(kept.count)] + kept + [UInt8](repeating: 0, count: legacyAdvertisingDataLimit - kept.count)
    }
}

/// Advertising data split into the two legacy payloads: whole AD structures go into the advertising data while
/// they fit in 31 bytes, the rest into the scan response (again 31 bytes at most; what does not fit is dropped, and
/// reported). The complete local name goes last, so flags and service UUIDs stay in the advertising data.
public struct AdvertisingPayload: Hashable, Sendable {
    public var advertisingData: [UInt8]
    public var scanResponse: [UInt8]
    /// AD structures that fitted in neither payload.
    public var dropped: [[UInt8]]

    public init(splitting data: [UInt8]) {
        var structures: [[UInt8]] = []
        var index = 0
        while index < data.count {
            let length = Int(data[index])
            if length == 0 { break }
            guard index + 1 + length <= data.count else { break }
            structures.append(Array(data[index...(index + length)]))
            index += 1 + length
        }
        // Names (0x08 short, 0x09 complete) last: a scanner filtering on the service UUID sees it without a scan.
        let names = structures.filter { $0.count > 1 && ($0[1] == 0x08 || $0[1] == 0x09) }
        let ordered = structures.filter { !($0.count > 1 && ($0[1] == 0x08 || $0[1] == 0x09)) } + names
        var advertising: [UInt8] = []
        var response: [UInt8] = []
        var dropped: [[UInt8]] = []
        let limit = HCICommand.legacyAdvertisingDataLimit
        for structure in ordered {
            if advertising.count + structure.count <= limit {
                advertising += structure
            } else if response.count + structure.count <= limit {
                response += structure
            } else {
                dropped.append(structure)
            }
        }
        self.advertisingData = advertising
        self.scanResponse = response
        self.dropped = dropped
    }
}
