import BLECore
import BlueZTransport
import Testing

/// HCI command encoding and event decoding as byte vectors (Core Vol 4 Part E 5.4, 7.7.65.2, 7.7.65.13).
@Suite(.timeLimit(.minutes(5))) struct BlueZHCICodecTests {
    @Test func legacyScanCommands() {
        // 01 | 0B 20 | 07 | type 01 (active) | interval 0010 | window 0010 | own public | filter 0
        #expect(HCICommand.leSetScanParameters(active: true).packet == [0x01, 0x0B, 0x20, 0x07, 0x01, 0x10, 0x00, 0x10, 0x00, 0x00, 0x00])
        // passive, interval 0x0060 (60 ms), window 0x0030, random own address
        #expect(
            HCICommand.leSetScanParameters(active: false, interval: 0x0060, window: 0x0030, ownAddressType: 1).packet
                == [0x01, 0x0B, 0x20, 0x07, 0x00, 0x60, 0x00, 0x30, 0x00, 0x01, 0x00])
        // 01 | 0C 20 | 02 | enable | filter duplicates
        #expect(HCICommand.leSetScanEnable(true).packet == [0x01, 0x0C, 0x20, 0x02, 0x01, 0x00])
        #expect(HCICommand.leSetScanEnable(false, filterDuplicates: true).packet == [0x01, 0x0C, 0x20, 0x02, 0x00, 0x01])
    }

    @Test func extendedScanCommands() {
        // 01 | 41 20 | 08 | own 00 | filter 00 | PHYs 01 (1M) | type 01 | interval 0010 | window 0010
        #expect(
            HCICommand.leSetExtendedScanParameters(active: true).packet
                == [0x01, 0x41, 0x20, 0x08, 0x00, 0x00, 0x01, 0x01, 0x10, 0x00, 0x10, 0x00])
        // 01 | 42 20 | 06 | enable | dup | duration 0000 | period 0000
        #expect(HCICommand.leSetExtendedScanEnable(true).packet == [0x01, 0x42, 0x20, 0x06, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00])
        #expect(HCICommand.leSetExtendedScanEnable(false).packet == [0x01, 0x42, 0x20, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])
    }

    @Test func commandCompleteAndStatus() throws {
        // Command Complete: ncmd 1, opcode 0x200B, status 0x0C (Command Disallowed)
        let complete = try HCIEvent.decode([0x04, 0x0E, 0x04, 0x01, 0x0B, 0x20, 0x0C])
        #expect(complete == .commandComplete(opcode: 0x200B, status: .commandDisallowed, returnParameters: [0x0C]))
        // Command Status: status 0x01 (Unknown Command), ncmd 1, opcode 0x2041
        let status = try HCIEvent.decode([0x04, 0x0F, 0x04, 0x01, 0x01, 0x41, 0x20])
        #expect(status == .commandStatus(opcode: 0x2041, status: .unknownCommand))
        // Command Complete without return parameters (NOP): status nil
        #expect(try HCIEvent.decode([0x04, 0x0E, 0x03, 0x01, 0x00, 0x00]) == .commandComplete(opcode: 0, status: nil, returnParameters: []))
        // Unknown status codes survive and print.
        #expect(HCIStatus(rawValue: 0x3E).description == "HCI status 0x3E")
        #expect(HCIStatus.commandDisallowed.description == "command disallowed (0x0C)")
        // Other events pass through.
        #expect(try HCIEvent.decode([0x04, 0x05, 0x01, 0x00]) == .other(code: 0x05, parameters: [0x00]))
        #expect(try HCIEvent.decode([0x04, 0x3E, 0x02, 0x03, 0x00]) == .leMeta(subevent: 0x03, parameters: [0x00]))
    }

    /// LE Advertising Report with two reports:
    /// 1. ADV_IND, random, C0:FF:EE:00:00:01, data `02 01 06` (flags 0x06), RSSI -60
    /// 2. SCAN_RSP, public, 11:22:33:44:55:66, data `04 09 44 46 55` (name "DFU"), RSSI 127 (not available)
    static let legacyTwoReports: [UInt8] = [
        0x04, 0x3E, 0x1E, 0x02, 0x02,
        0x00, 0x01, 0x01, 0x00, 0x00, 0xEE, 0xFF, 0xC0, 0x03, 0x02, 0x01, 0x06, 0xC4,
        0x04, 0x00, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x05, 0x04, 0x09, 0x44, 0x46, 0x55, 0x7F,
    ]

    /// LE Extended Advertising Report, one report: event type 0x0001 (connectable), random, C0:FF:EE:00:00:01,
    /// PHY 1M/none, SID 0xFF, TX power 127, RSSI -80, no periodic, no direct address, data `02 01 06`.
    static let extendedReport: [UInt8] = [
        0x04, 0x3E, 0x1D, 0x0D, 0x01,
        0x01, 0x00, 0x01, 0x01, 0x00, 0x00, 0xEE, 0xFF, 0xC0, 0x01, 0x00, 0xFF, 0x7F, 0xB0,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x02, 0x01, 0x06,
    ]

    @Test func legacyAdvertisingReportWithTwoReports() throws {
        guard case .advertisingReports(let reports) = try HCIEvent.decode(Self.legacyTwoReports) else {
            Issue.record("not an advertising report")
            return
        }
        try #require(reports.count == 2)
        let first = reports[0]
        #expect(first.address == BluetoothAddress("C0:FF:EE:00:00:01"))
        #expect(first.peer?.type == .random)
        #expect(first.rssi == -60)
        #expect(first.data == [0x02, 0x01, 0x06])
        #expect(first.connectable && !first.isScanResponse)
        let second = reports[1]
        #expect(second.address == BluetoothAddress("11:22:33:44:55:66"))
        #expect(second.peer?.type == .public)
        #expect(second.rssi == nil)
        #expect(second.isScanResponse && !second.connectable)
        #expect(AdvertisingData(parsing: second.data).completeName == "DFU")
    }

    @Test func extendedAdvertisingReport() throws {
        guard case .advertisingReports(let reports) = try HCIEvent.decode(Self.extendedReport) else {
            Issue.record("not an advertising report")
            return
        }
        try #require(reports.count == 1)
        #expect(reports[0].eventType == 0x0001)
        #expect(reports[0].address == BluetoothAddress("C0:FF:EE:00:00:01"))
        #expect(reports[0].peer == PeerAddress(BluetoothAddress("C0:FF:EE:00:00:01")!, type: .random))
        #expect(reports[0].rssi == -80)
        #expect(reports[0].data == [0x02, 0x01, 0x06])
        #expect(reports[0].connectable && !reports[0].isScanResponse)
    }

    @Test func everyTruncatedPrefixIsRejected() {
        for vector in [Self.legacyTwoReports, Self.extendedReport, [0x04, 0x0E, 0x04, 0x01, 0x0B, 0x20, 0x0C], [0x04, 0x0F, 0x04, 0x00, 0x01, 0x42, 0x20]] {
            for length in 0..<vector.count {
                #expect(throws: HCIDecodeError.self) { try HCIEvent.decode(Array(vector.prefix(length))) }
                do {
                    _ = try HCIEvent.decode(Array(vector.prefix(length)))
                } catch {
                    #expect(error.code == .truncated, "prefix \(length)")
                }
            }
        }
    }

    /// The parameter length is consistent but the reports inside it are cut short: truncated, not a crash.
    @Test func reportsCutInsideTheParameters() {
        for cut in 2..<(Self.legacyTwoReports.count - 3) {
            var packet = Array(Self.legacyTwoReports.prefix(3 + cut))
            packet[2] = UInt8(cut)
            #expect(throws: HCIDecodeError.self) { try HCIEvent.decode(packet) }
        }
    }

    @Test func malformedPackets() {
        // An ACL packet indicator is not an event.
        #expect(throws: HCIDecodeError(.malformed, "")) { try HCIEvent.decode([0x02, 0x00, 0x00]) }
        // Legacy advertising data longer than 31 bytes.
        var packet: [UInt8] = [0x04, 0x3E, 0x0C, 0x02, 0x01, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 40, 0]
        packet[2] = UInt8(packet.count - 3)
        do {
            _ = try HCIEvent.decode(packet)
            Issue.record("accepted 40 bytes of legacy advertising data")
        } catch {
            #expect(error.code == .malformed)
        }
    }
}
