import BLECore
import BlueZTransport
import Testing

/// The HCI commands of the peripheral role and of link tuning, and the link events, as byte vectors
/// (Core Vol 4 Part E 7.1.6, 7.8.4-7.8.9, 7.8.18, 7.8.33, 7.8.47, 7.8.49, 7.7.5, 7.7.65.3/7/12).
@Suite(.timeLimit(.minutes(5))) struct BlueZPeripheralCodecTests {
    static let bracelet = BluetoothAddress("C6:05:04:03:02:01")!

    @Test func advertisingCommands() {
        // 01 | 05 20 | 06 | C6:05:04:03:02:01 least significant byte first
        #expect(HCICommand.leSetRandomAddress(Self.bracelet).packet == [0x01, 0x05, 0x20, 0x06, 0x01, 0x02, 0x03, 0x04, 0x05, 0xC6])
        // 01 | 06 20 | 0F | min 00A0 | max 00A0 (100 ms) | ADV_IND 00 | own random 01 | peer type 00 | peer 0×6 |
        // channels 07 | filter 00
        #expect(
            HCICommand.leSetAdvertisingParameters(ownAddressType: 1).packet
                == [0x01, 0x06, 0x20, 0x0F, 0xA0, 0x00, 0xA0, 0x00, 0x00, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0x07, 0x00])
        // 01 | 08 20 | 20 | length 03 | 02 01 06 | 28 zero bytes
        let data = HCICommand.leSetAdvertisingData([0x02, 0x01, 0x06]).packet
        #expect(data.count == 4 + 32)
        #expect(Array(data.prefix(8)) == [0x01, 0x08, 0x20, 0x20, 0x03, 0x02, 0x01, 0x06])
        #expect(data.dropFirst(8).allSatisfy { $0 == 0 })
        // 01 | 09 20 | 20 | length 00 | 31 zero bytes
        #expect(HCICommand.leSetScanResponseData([]).packet == [0x01, 0x09, 0x20, 0x20, 0x00] + [UInt8](repeating: 0, count: 31))
        // More than 31 bytes are cut at 31.
        #expect(HCICommand.leSetAdvertisingData([UInt8](repeating: 0xAA, count: 40)).parameters.first == 31)
        // 01 | 0A 20 | 01 | enable
        #expect(HCICommand.leSetAdvertisingEnable(true).packet == [0x01, 0x0A, 0x20, 0x01, 0x01])
        #expect(HCICommand.leSetAdvertisingEnable(false).packet == [0x01, 0x0A, 0x20, 0x01, 0x00])
        // 01 | 06 04 | 03 | handle 0040 | reason 13 (remote user terminated)
        #expect(HCICommand.disconnect(handle: 0x0040).packet == [0x01, 0x06, 0x04, 0x03, 0x40, 0x00, 0x13])
    }

    @Test func linkTuningCommands() {
        // 01 | 13 20 | 0E | handle 0040 | min 0006 (7.5 ms) | max 000C (15 ms) | latency 0 | timeout 0190 (4 s) |
        // CE 0000 0000
        #expect(
            HCICommand.leConnectionUpdate(handle: 0x40, intervalMin: 6, intervalMax: 12, latency: 0, supervisionTimeout: 400).packet
                == [0x01, 0x13, 0x20, 0x0E, 0x40, 0x00, 0x06, 0x00, 0x0C, 0x00, 0x00, 0x00, 0x90, 0x01, 0x00, 0x00, 0x00, 0x00])
        // 01 | 32 20 | 07 | handle 0040 | all_phys 00 | tx 02 (2M) | rx 02 | options 0000
        #expect(HCICommand.leSetPHY(handle: 0x40).packet == [0x01, 0x32, 0x20, 0x07, 0x40, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00])
        // 01 | 22 20 | 06 | handle 0040 | octets 00FB (251) | time 0848 (2120 µs)
        #expect(HCICommand.leSetDataLength(handle: 0x40).packet == [0x01, 0x22, 0x20, 0x06, 0x40, 0x00, 0xFB, 0x00, 0x48, 0x08])
        // 01 | 30 20 | 02 | handle 0040
        #expect(HCICommand.leReadPHY(handle: 0x40).packet == [0x01, 0x30, 0x20, 0x02, 0x40, 0x00])
    }

    /// Disconnection Complete: status 00, handle 0x0040, reason 0x13.
    static let disconnection: [UInt8] = [0x04, 0x05, 0x04, 0x00, 0x40, 0x00, 0x13]
    /// LE Connection Update Complete: status 00, handle 0x2040 (upper bits set), interval 6, latency 0, timeout 400.
    static let connectionUpdate: [UInt8] = [0x04, 0x3E, 0x0A, 0x03, 0x00, 0x40, 0x20, 0x06, 0x00, 0x00, 0x00, 0x90, 0x01]
    /// LE Data Length Change: handle 0x0040, tx 251 octets / 2120 µs, rx 251 / 2120.
    static let dataLength: [UInt8] = [0x04, 0x3E, 0x0B, 0x07, 0x40, 0x00, 0xFB, 0x00, 0x48, 0x08, 0xFB, 0x00, 0x48, 0x08]
    /// LE PHY Update Complete: status 00, handle 0x0040, tx 2M, rx 2M.
    static let phyUpdate: [UInt8] = [0x04, 0x3E, 0x06, 0x0C, 0x00, 0x40, 0x00, 0x02, 0x02]

    @Test func linkEventsDecode() throws {
        #expect(try HCILinkEvent.decode(HCIEvent.decode(Self.disconnection)) == .disconnectionComplete(status: .success, handle: 0x40, reason: 0x13))
        #expect(
            try HCILinkEvent.decode(HCIEvent.decode(Self.connectionUpdate))
                == .connectionUpdateComplete(status: .success, handle: 0x40, interval: 6, latency: 0, timeout: 400))
        #expect(
            try HCILinkEvent.decode(HCIEvent.decode(Self.dataLength))
                == .dataLengthChange(handle: 0x40, maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 251, maxRxTime: 2120))
        let phy = try HCILinkEvent.decode(HCIEvent.decode(Self.phyUpdate))
        #expect(phy == .phyUpdateComplete(status: .success, handle: 0x40, transmit: 2, receive: 2))
        #expect(phy?.handle == 0x40)
        // Other events are not link events.
        #expect(try HCILinkEvent.decode(.leMeta(subevent: 0x01, parameters: [0x00])) == nil)
        #expect(try HCILinkEvent.decode(.commandStatus(opcode: 0x2013, status: .success)) == nil)
        // LE Read PHY return parameters: status 00 | handle 0040 | tx 01 | rx 02
        let read = try HCIReadPHYResult(returnParameters: [0x00, 0x40, 0x00, 0x01, 0x02])
        #expect(read.status == .success && read.handle == 0x40 && read.transmit == 1 && read.receive == 2)
    }

    /// Every truncated prefix of a link event's parameters is `.truncated`, never a wrong value.
    @Test(arguments: [disconnection, connectionUpdate, dataLength, phyUpdate])
    func truncatedLinkEvents(_ packet: [UInt8]) throws {
        let full = try HCIEvent.decode(packet)
        let (code, parameters): (UInt8?, [UInt8]) =
            switch full {
            case .other(let code, let parameters): (code, parameters)
            case .leMeta(_, let parameters): (nil, parameters)
            default: (nil, [])
            }
        for length in 0..<parameters.count {
            let prefix = Array(parameters.prefix(length))
            let event: HCIEvent =
                if let code { .other(code: code, parameters: prefix) } else { .leMeta(subevent: packet[3], parameters: prefix) }
            #expect(throws: HCIDecodeError(.truncated, "")) { try HCILinkEvent.decode(event) }
        }
        #expect(throws: HCIDecodeError(.truncated, "")) { try HCIReadPHYResult(returnParameters: [0x00, 0x40, 0x00, 0x01]) }
    }

    @Test func payloadSplitKeepsServicesInTheAdvertisingData() {
        // flags (3) + FE59 list (4) + name "Bracelet" (10): 17 bytes, all in the advertising data.
        let bracelet = AdvertisingData.build(flags: 0x06, name: "Bracelet", services: [BluetoothUUID(0xFE59)])
        let short = AdvertisingPayload(splitting: bracelet)
        #expect(short.advertisingData == bracelet)
        #expect(short.scanResponse.isEmpty)
        // A 128-bit UUID (18) + flags (3) + a 20-byte name (22): the name moves to the scan response.
        let long = AdvertisingData.build(
            flags: 0x06, name: "DfuTarg-0123456789AB", services: [BluetoothUUID("8EC90001-F315-4F60-9FB8-838830DAEA50")!])
        let split = AdvertisingPayload(splitting: long)
        #expect(split.advertisingData.count == 21)
        #expect(split.advertisingData.prefix(3) == [0x02, 0x01, 0x06])
        #expect(split.scanResponse == [21, 0x09] + Array("DfuTarg-0123456789AB".utf8))
        #expect(split.dropped.isEmpty)
        #expect(AdvertisingData(parsing: split.advertisingData + split.scanResponse).name == "DfuTarg-0123456789AB")
        // Structures that fit nowhere are reported; a malformed tail is ignored.
        let huge: [UInt8] = [30, 0xFF] + [UInt8](repeating: 1, count: 29) + [30, 0xFF]
            + [UInt8](repeating: 2, count: 29) + [30, 0xFF] + [UInt8](repeating: 3, count: 29) + [9, 0x09, 0x41]
        let overflow = AdvertisingPayload(splitting: huge)
        #expect(overflow.dropped.count == 1)
        #expect(overflow.advertisingData.count == 31 && overflow.scanResponse.count == 31)
    }

    @Test func reportDescription() {
        var report = LinkTuningReport(privileged: true)
        report.interval = 6
        report.latency = 0
        report.supervisionTimeout = 400
        report.transmitPHY = 2
        report.receivePHY = 2
        report.notes = ["data length: not supported here"]
        #expect(
            report.description
                == "link: interval 7.5 ms, latency 0, timeout 4000 ms; PHY 2M/2M (tx/rx) (data length: not supported here)")
        var plain = LinkTuningReport(privileged: false)
        plain.transmitPHY = 1
        plain.receivePHY = 1
        #expect(plain.description == "link: interval unchanged; PHY 1M/1M (tx/rx)")
        let warnings = LinkTuningWarnings()
        #expect(warnings.claim())
        #expect(!warnings.claim())
    }
}

/// A connect waits for every scan of the process to end (their disable included).
@Suite(.timeLimit(.minutes(5))) struct BlueZScanActivityTests {
    @Test func connectWaitsForTheLastScan() async {
        let activity = ScanActivity()
        await activity.waitIdle()  // idle: returns at once
        activity.begin()
        activity.begin()
        let waiter = Task { await activity.waitIdle(timeout: .seconds(600)) }
        while activity.waitingConnects == 0 { await Task.yield() }
        activity.end()
        #expect(activity.waitingConnects == 1, "one scan is still active")
        activity.end()
        await waiter.value
        #expect(activity.activeScans == 0 && activity.waitingConnects == 0)
        activity.end()  // unbalanced end stays at zero
        #expect(activity.activeScans == 0)
    }

    /// A scan that keeps running is not waited for past the timeout, and the abandoned wait leaves nothing behind.
    @Test func waitingEndsAtTheTimeout() async {
        let activity = ScanActivity()
        activity.begin()
        await activity.waitIdle(timeout: .zero)
        #expect(activity.activeScans == 1)
        #expect(activity.waitingConnects == 0)
    }
}
