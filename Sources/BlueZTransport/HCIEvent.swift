import BLECore

/// Why an HCI event packet could not be decoded. Truncated input (fewer bytes than a length field promised) is
/// told apart from malformed input (a packet that is not an event, a length field that disagrees).
public struct HCIDecodeError: CodedError, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
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

    init(_ truncated: ByteReader.Truncated) {
        self.init(.truncated, truncated.description)
    }

    /// Errors compare by code; the reason is for people.

    public var description: String { "\(code): \(reason)" }
}

/// One advertising report, from either the legacy or the extended LE Advertising Report event.
public struct HCIAdvertisingReport: Hashable, Sendable {
    /// Legacy event type (0 ADV_IND … 4 SCAN_RSP), or the extended event-type bit field.
    public var eventType: UInt16
    /// HCI address type: 0 public, 1 random, 2 public identity, 3 random identity, 0xFF anonymous.
    public var addressType: UInt8
    public var address: BluetoothAddress
    /// nil when the controller reports 127 ("not available").
    public var rssi: Int8?
    public var data: [UInt8]
    public var isScanResponse: Bool
    public var connectable: Bool

    public init(
        eventType: UInt16, addressType: UInt8, address: BluetoothAddress, rssi: Int8?, data: [UInt8],
        isScanResponse: Bool, connectable: Bool
    ) {
        self.eventType = eventType
        self.addressType = addressType
        self.address = address
        self.rssi = rssi
        self.data = data
        self.isScanResponse = isScanResponse
        self.connectable = connectable
    }

    /// The peer as BLECore types it (identity types fold onto public/random); nil for anonymous advertisers.
    public var peer: PeerAddress? {
        switch addressType {
        case 0, 2: PeerAddress(address, type: .public)
        case 1, 3: PeerAddress(address, type: .random)
        default: nil
        }
    }
}

/// The HCI events the scanner reads (Core Vol 4 Part E 7.7), after the H:4 packet indicator `04`:
///
///     04 | event code u8 | parameter length u8 | parameters
///     Command Complete  0x0E: num_cmd u8 | opcode u16 | return parameters (status first for LE scan commands)
///     Command Status    0x0F: status u8 | num_cmd u8 | opcode u16
///     LE Meta           0x3E: subevent u8 | …
///       0x02 LE Advertising Report: num u8, then per report (as the kernel reads it):
///            event_type u8 | addr_type u8 | addr[6] LE | data_len u8 | data | rssi i8
///       0x0D LE Extended Advertising Report: num u8, then per report (24 bytes + data):
///            event_type u16 | addr_type u8 | addr[6] LE | primary_phy u8 | secondary_phy u8 | sid u8 |
///            tx_power i8 | rssi i8 | periodic_interval u16 | direct_addr_type u8 | direct_addr[6] |
///            data_len u8 | data
public enum HCIEvent: Hashable, Sendable {
    case commandComplete(opcode: UInt16, status: HCIStatus?, returnParameters: [UInt8])
    case commandStatus(opcode: UInt16, status: HCIStatus)
    case advertisingReports([HCIAdvertisingReport])
    /// An LE Meta subevent this decoder does not interpret.
    case leMeta(subevent: UInt8, parameters: [UInt8])
    /// Any other event.
    case other(code: UInt8, parameters: [UInt8])

    public static let commandCompleteCode: UInt8 = 0x0E
    public static let commandStatusCode: UInt8 = 0x0F
    public static let leMetaCode: UInt8 = 0x3E
    public static let leAdvertisingReportSubevent: UInt8 = 0x02
    public static let leExtendedAdvertisingReportSubevent: UInt8 = 0x0D

    /// Decodes one packet read from a raw HCI socket (with the `04` indicator).
    public static func decode(_ packet: [UInt8]) throws(HCIDecodeError) -> HCIEvent {
        do {
            var reader = ByteReader(packet)
            let indicator = try reader.readUInt8("packet indicator")
            guard indicator == 0x04 else {
                throw HCIDecodeError(.malformed, "not an HCI event packet (indicator 0x\(String(indicator, radix: 16)))")
            }
            let code = try reader.readUInt8("event code")
            let length = Int(try reader.readUInt8("parameter length"))
            let parameters = try reader.readBytes(length, "event parameters")
            return try decode(code: code, parameters: parameters)
        } catch let error as ByteReader.Truncated {
            throw HCIDecodeError(error)
        } catch let error as HCIDecodeError {
            throw error
        } catch {
            throw HCIDecodeError(.malformed, "\(error)")
        }
    }

    private static func decode(code: UInt8, parameters: [UInt8]) throws -> HCIEvent {
        var reader = ByteReader(parameters)
        switch code {
        case commandCompleteCode:
            _ = try reader.readUInt8("num_hci_command_packets")
            let opcode = try reader.readUInt16("command opcode")
            let rest = reader.readRemaining()
            return .commandComplete(opcode: opcode, status: rest.first.map(HCIStatus.init(rawValue:)), returnParameters: rest)
        case commandStatusCode:
            let status = HCIStatus(rawValue: try reader.readUInt8("status"))
            _ = try reader.readUInt8("num_hci_command_packets")
            return .commandStatus(opcode: try reader.readUInt16("command opcode"), status: status)
        case leMetaCode:
            let subevent = try reader.readUInt8("LE subevent")
            switch subevent {
            case leAdvertisingReportSubevent: return .advertisingReports(try legacyReports(&reader))
            case leExtendedAdvertisingReportSubevent: return .advertisingReports(try extendedReports(&reader))
            default: return .leMeta(subevent: subevent, parameters: reader.readRemaining())
            }
        default:
            return .other(code: code, parameters: parameters)
        }
    }

    private static func address(_ reader: inout ByteReader) throws -> BluetoothAddress {
        let bytes = try reader.readBytes(6, "address")
        guard let address = BluetoothAddress(littleEndianBytes: bytes) else {
            throw HCIDecodeError(.malformed, "address")
        }
        return address
    }

    private static func rssi(_ raw: UInt8) -> Int8? { raw == 127 ? nil : Int8(bitPattern: raw) }

    private static func legacyReports(_ reader: inout ByteReader) throws -> [HCIAdvertisingReport] {
        let count = Int(try reader.readUInt8("num_reports"))
        var reports: [HCIAdvertisingReport] = []
        for _ in 0..<count {
            let type = try reader.readUInt8("event_type")
            let addressType = try reader.readUInt8("address_type")
            let address = try address(&reader)
            let length = Int(try reader.readUInt8("data_length"))
            guard length <= 31 else { throw HCIDecodeError(.malformed, "legacy advertising data of \(length) bytes (max 31)") }
            let data = try reader.readBytes(length, "data")
            let rssi = rssi(try reader.readUInt8("rssi"))
            reports.append(
                HCIAdvertisingReport(
                    eventType: UInt16(type), addressType: addressType, address: address, rssi: rssi, data: data,
                    isScanResponse: type == 0x04, connectable: type == 0x00 || type == 0x01))
        }
        return reports
    }

    private static func extendedReports(_ reader: inout ByteReader) throws -> [HCIAdvertisingReport] {
        let count = Int(try reader.readUInt8("num_reports"))
        var reports: [HCIAdvertisingReport] = []
        for _ in 0..<count {
            let type = try reader.readUInt16("event_type")
            let addressType = try reader.readUInt8("address_type")
            let address = try address(&reader)
            _ = try reader.readBytes(4, "primary_phy, secondary_phy, sid, tx_power")
            let rssi = rssi(try reader.readUInt8("rssi"))
            _ = try reader.readBytes(9, "periodic_interval, direct_address_type, direct_address")
            let length = Int(try reader.readUInt8("data_length"))
            let data = try reader.readBytes(length, "data")
            reports.append(
                HCIAdvertisingReport(
                    eventType: type, addressType: addressType, address: address, rssi: rssi, data: data,
                    isScanResponse: type & 0x0008 != 0, connectable: type & 0x0001 != 0))
        }
        return reports
    }
}

extension HCIDecodeError.Code: RawRepresentable {
    public init(rawValue: String) { self.init(name: rawValue) }
    public var rawValue: String { name }
}

extension HCIDecodeError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
