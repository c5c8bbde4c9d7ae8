import BLECore

/// The connection events link tuning and the peripheral wait for (Core Vol 4 Part E 7.7.5, 7.7.65.3, 7.7.65.7,
/// 7.7.65.12), decoded from an ``HCIEvent`` (`.other` or `.leMeta` with the parameters after the subevent code):
///
///     Disconnection Complete   event 0x05:     status u8 | handle u16 | reason u8
///     Connection Update Compl. LE subevent 03: status u8 | handle u16 | interval u16 (×1.25 ms) | latency u16 |
///                                              supervision_timeout u16 (×10 ms)
///     Data Length Change       LE subevent 07: handle u16 | max_tx_octets u16 | max_tx_time u16 |
///                                              max_rx_octets u16 | max_rx_time u16
///     PHY Update Complete      LE subevent 0C: status u8 | handle u16 | tx_phy u8 | rx_phy u8 (1 1M, 2 2M, 3 Coded)
///
/// Handles are 12 bits; the upper bits (reserved) are masked off.
public enum HCILinkEvent: Hashable, Sendable {
    case disconnectionComplete(status: HCIStatus, handle: UInt16, reason: UInt8)
    case connectionUpdateComplete(status: HCIStatus, handle: UInt16, interval: UInt16, latency: UInt16, timeout: UInt16)
    case dataLengthChange(handle: UInt16, maxTxOctets: UInt16, maxTxTime: UInt16, maxRxOctets: UInt16, maxRxTime: UInt16)
    case phyUpdateComplete(status: HCIStatus, handle: UInt16, transmit: UInt8, receive: UInt8)

    public static let disconnectionCompleteCode: UInt8 = 0x05
    public static let connectionUpdateCompleteSubevent: UInt8 = 0x03
    public static let dataLengthChangeSubevent: UInt8 = 0x07
    public static let phyUpdateCompleteSubevent: UInt8 = 0x0C

    /// The link event in `event`; nil for any other event. Throws when a link event is truncated.
    public static func decode(_ event: HCIEvent) throws(HCIDecodeError) -> HCILinkEvent? {
        do {
            switch event {
            case .other(let code, let parameters) where code == disconnectionCompleteCode:
                var reader = ByteReader(parameters)
                let status = HCIStatus(rawValue: try reader.readUInt8("status"))
                let handle = try reader.readUInt16("handle") & 0x0FFF
                return .disconnectionComplete(status: status, handle: handle, reason: try reader.readUInt8("reason"))
            case .leMeta(let subevent, let parameters):
                var reader = ByteReader(parameters)
                switch subevent {
                case connectionUpdateCompleteSubevent:
                    let status = HCIStatus(rawValue: try reader.readUInt8("status"))
                    let handle = try reader.readUInt16("handle") & 0x0FFF
                    let interval = try reader.readUInt16("interval")
                    let latency = try reader.readUInt16("latency")
                    let timeout = try reader.readUInt16("supervision timeout")
                    return .connectionUpdateComplete(
                        status: status, handle: handle, interval: interval, latency: latency, timeout: timeout)
                case dataLengthChangeSubevent:
                    let handle = try reader.readUInt16("handle") & 0x0FFF
                    let txOctets = try reader.readUInt16("max_tx_octets")
                    let txTime = try reader.readUInt16("max_tx_time")
                    let rxOctets = try reader.readUInt16("max_rx_octets")
                    let rxTime = try reader.readUInt16("max_rx_time")
                    return .dataLengthChange(
                        handle: handle, maxTxOctets: txOctets, maxTxTime: txTime, maxRxOctets: rxOctets, maxRxTime: rxTime)
                case phyUpdateCompleteSubevent:
                    let status = HCIStatus(rawValue: try reader.readUInt8("status"))
                    let handle = try reader.readUInt16("handle") & 0x0FFF
                    let transmit = try reader.readUInt8("tx_phy")
                    return .phyUpdateComplete(status: status, handle: handle, transmit: transmit, receive: try reader.readUInt8("rx_phy"))
                default:
                    return nil
                }
            default:
                return nil
            }
        } catch {
            throw HCIDecodeError(error)
        }
    }

    /// The connection handle the event is about.
    public var handle: UInt16 {
        switch self {
        case .disconnectionComplete(_, let handle, _), .connectionUpdateComplete(_, let handle, _, _, _),
            .dataLengthChange(let handle, _, _, _, _), .phyUpdateComplete(_, let handle, _, _):
            return handle
        }
    }
}

/// The return parameters of LE Read PHY (0x2030): `status u8 | handle u16 | tx_phy u8 | rx_phy u8`.
public struct HCIReadPHYResult: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    public var transmit: UInt8
    public var receive: UInt8

    public init(returnParameters: [UInt8]) throws(HCIDecodeError) {
        var reader = ByteReader(returnParameters)
        do {
            status = HCIStatus(rawValue: try reader.readUInt8("status"))
            handle = try reader.readUInt16("handle") & 0x0FFF
            transmit = try reader.readUInt8("tx_phy")
            receive = try reader.readUInt8("rx_phy")
        } catch {
            throw HCIDecodeError(error)
        }
    }
}

/// An LE PHY as HCI numbers it: 1 LE 1M, 2 LE 2M, 3 LE Coded.
public enum LEPHYName {
    public static func describe(_ phy: UInt8) -> String {
        switch phy {
        case 1: "1M"
        case 2: "2M"
        case 3: "Coded"
        default: "PHY \(phy)"
        }
    }
}
