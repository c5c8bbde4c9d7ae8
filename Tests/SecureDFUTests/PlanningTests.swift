import BLECore
import DFUProtocol
import Testing

@testable import SecureDFU

@Suite(.timeLimit(.minutes(5))) struct PlanningTests {
    @Test func objectRanges() {
        #expect(DFUPlanning.objectRanges(imageSize: 0, maxObjectSize: 4096) == [])
        #expect(DFUPlanning.objectRanges(imageSize: 4096, maxObjectSize: 4096) == [0..<4096])
        #expect(
            DFUPlanning.objectRanges(imageSize: 10_000, maxObjectSize: 4096) == [0..<4096, 4096..<8192, 8192..<10_000])
        #expect(DFUPlanning.objectRanges(imageSize: 8192, maxObjectSize: 4096) == [0..<4096, 4096..<8192])
        #expect(DFUPlanning.objectRanges(imageSize: 5, maxObjectSize: 0) == [])
    }

    @Test(
        arguments: [(22, nil), (23, 20), (24, 20), (27, 24), (185, 180), (247, 244), (251, 248), (517, 512)]
            as [(Int, Int?)])
    func packetSize(mtu: Int, expected: Int?) {
        #expect(DFUPlanning.packetSize(mtu: mtu) == expected)
    }

    @Test func packets() {
        #expect(DFUPlanning.packets(in: 0..<50, packetSize: 20) == [0..<20, 20..<40, 40..<50])
        #expect(DFUPlanning.packets(in: 4096..<4136, packetSize: 20) == [4096..<4116, 4116..<4136])
        #expect(DFUPlanning.packetCount(41, packetSize: 20) == 3)
    }

    @Test func prefixCRCMatchesZlibAtEveryOffset() {
        let bytes = testBytes(1000)
        let prefix = PrefixCRC(bytes, stride: 64)
        for offset in [0, 1, 63, 64, 65, 500, 999, 1000] {
            #expect(prefix.crc(upTo: offset) == CRC32.checksum(bytes[0..<offset]))
        }
        #expect(prefix.crc(upTo: 1001) == nil)
        #expect(prefix.crc(upTo: -1) == nil)
        // zlib crc32(b"123456789") = 0xCBF43926
        #expect(PrefixCRC(Array("123456789".utf8)).crc(upTo: 9) == 0xCBF4_3926)
    }

    /// What a device holds after dropping packets `lost` of `packets` (it appends what it takes: the rest shifts),
    /// as its Calculate Checksum answer: offset and CRC over the image's prefix before the first packet, then the kept
    /// packets.
    static func report(_ image: [UInt8], _ packets: [Range<Int>], lost: Range<Int>) -> (offset: Int, crc: UInt32) {
        var kept = Array(image[0..<packets[0].lowerBound])
        for index in packets.indices where !lost.contains(index) { kept += image[packets[index]] }
        return (kept.count, CRC32.checksum(kept[...]))
    }

    @Test func firstLostPacketFindsTheOneRunOfLostPackets() {
        let image = testBytes(4096 + 200, seed: 3)
        let prefix = PrefixCRC(image)
        // One object at 4096: ten packets of 20 bytes (the last one too), sent after a true prefix of 4096 bytes.
        let packets = DFUPlanning.packets(in: 4096..<4296, packetSize: 20)
        for lost in [0..<1, 1..<2, 5..<8, 9..<10, 0..<9] {
            let (offset, crc) = Self.report(image, packets, lost: lost)
            #expect(prefix.firstLostPacket(of: packets, offset: offset, crc: crc) == lost.lowerBound, "\(lost)")
        }
        // Two separate runs (packets 1 and 6): no one run explains it.
        var kept = Array(image[0..<4096])
        for index in packets.indices where index != 1 && index != 6 { kept += image[packets[index]] }
        #expect(prefix.firstLostPacket(of: packets, offset: kept.count, crc: CRC32.checksum(kept[...])) == nil)
        // Everything lost is one run from the first packet; nothing lost, a corrupted CRC, an offset before the
        // packets: nil.
        #expect(prefix.firstLostPacket(of: packets, offset: 4096, crc: CRC32.checksum(image[0..<4096])) == 0)
        #expect(prefix.firstLostPacket(of: packets, offset: 4296, crc: CRC32.checksum(image[0..<4296])) == nil)
        let (offset, crc) = Self.report(image, packets, lost: 3..<4)
        #expect(prefix.firstLostPacket(of: packets, offset: offset, crc: crc ^ 1) == nil)
        #expect(prefix.firstLostPacket(of: packets, offset: 4000, crc: crc) == nil)
        #expect(prefix.firstLostPacket(of: [], offset: 0, crc: 0) == nil)
        // A shorter last packet (an object's end): losing it alone is one run too.
        let uneven = DFUPlanning.packets(in: 4096..<4290, packetSize: 20)
        let (unevenOffset, unevenCRC) = Self.report(image, uneven, lost: 9..<10)
        #expect(prefix.firstLostPacket(of: uneven, offset: unevenOffset, crc: unevenCRC) == 9)
    }

    // secure-dfu-anchors.md 3.3, one row per line of the table (plus offset beyond the packet).
    static let initPacket = testBytes(141, seed: 9)
    static let initRows: [(String, UInt32, UInt32, InitResumeDecision)] = [
        ("offset 0", 0, 0, .create),
        ("partial prefix, CRC ok", 100, CRC32.checksum(initPacket[0..<100]), .continueFrom(100)),
        ("complete, CRC ok", 141, CRC32.checksum(initPacket), .executeAgain),
        ("partial, CRC bad", 100, 0xDEAD_BEEF, .create),
        ("complete, CRC bad", 141, 0xDEAD_BEEF, .create),
        ("offset beyond the packet", 142, CRC32.checksum(initPacket), .create),
    ]

    @Test(arguments: initRows)
    func initResume(row: (String, UInt32, UInt32, InitResumeDecision)) {
        let info = ObjectInfo(maxSize: 512, offset: row.1, crc: row.2)
        #expect(DFUPlanning.initResumeDecision(initPacket: Self.initPacket, remote: info) == row.3, "\(row.0)")
    }

    // secure-dfu-anchors.md 3.4 with max = 4096 and an image of 10 000 bytes (objects end at 4096, 8192, 10000).
    static let image = PrefixCRC(testBytes(10_000, seed: 5))
    static func crc(_ offset: Int) -> UInt32 { image.crc(upTo: offset) ?? 0 }
    static let dataRows: [(String, Int, UInt32, Int?, DataResumeDecision)] = [
        ("off == 0", 0, 0, nil, .start),
        ("CRC ok, off == image size", 10_000, crc(10_000), nil, .executeAgain(objectIndex: 2)),
        ("CRC ok, off % max == 0 (first object)", 4096, crc(4096), nil, .executeAgain(objectIndex: 0)),
        ("CRC ok, off % max == 0 (second object)", 8192, crc(8192), nil, .executeAgain(objectIndex: 1)),
        ("CRC ok, inside object 0", 1000, crc(1000), nil, .continueObject(objectIndex: 0, from: 1000)),
        ("CRC ok, inside object 1", 5000, crc(5000), nil, .continueObject(objectIndex: 1, from: 5000)),
        ("CRC ok, inside the last object", 9000, crc(9000), 8192, .continueObject(objectIndex: 2, from: 9000)),
        ("CRC bad, off % max == 0", 8192, 0x1234, nil, .recreate(objectIndex: 1)),
        ("CRC bad, inside object 1", 5000, 0x1234, nil, .recreate(objectIndex: 1)),
        ("CRC bad, inside object 1, journal: object 0 executed", 5000, 0x1234, 4096, .recreate(objectIndex: 1)),
        ("CRC bad, off % max == 0, journal: that object executed", 8192, 0x1234, 8192, .restartFromScratch),
        ("CRC bad at the image end", 10_000, 0x1234, nil, .recreate(objectIndex: 2)),
        ("off > image size", 12_288, 0, nil, .restartFromScratch),
    ]

    @Test(arguments: dataRows)
    func dataResume(row: (String, Int, UInt32, Int?, DataResumeDecision)) {
        let info = ObjectInfo(maxSize: 4096, offset: UInt32(row.1), crc: row.2)
        let decision = DFUPlanning.dataResumeDecision(
            image: Self.image, maxObjectSize: 4096, remote: info, executedOffset: row.3)
        #expect(decision == row.4, "\(row.0)")
    }
}

@Suite(.timeLimit(.minutes(5))) struct PacingTests {
    @Test(arguments: [
        ("prn:12", "prn:12", 12 as UInt16), ("checksum:8", "checksum:8", 0), ("object", "object", 0),
        ("burst:12:100ms", "burst:12:100ms", 0), ("adaptive", "adaptive", 0), ("ios", "ios", 12),
        ("android", "android", 0), ("nrfutil", "nrfutil", 0), ("seed-pacing", "seed-pacing", 0),
        ("with-response", "with-response", 0), ("burst:4:20", "burst:4:20ms", 0),
    ])
    func parse(text: String, description: String, prn: UInt16) throws {
        let policy = try PacingPolicies.parse(text)
        #expect(policy.description == description)
        #expect(policy.packetReceiptInterval == prn)
    }

    @Test(arguments: ["", "prn", "prn:0", "prn:x", "checksum:-1", "burst:3", "fast", "object:2"])
    func rejects(text: String) {
        let error = #expect(throws: PacingPolicies.ParseError.self) { try PacingPolicies.parse(text) }
        #expect(error?.code == .unknownPacing)
        #expect(error?.text == text)
    }

    @Test func iosDelaysOnlyTheFirstObject() throws {
        let ios = try PacingPolicies.parse("ios")
        #expect(ios.delayAfterCreate(objectIndex: 0) == .milliseconds(400))
        #expect(ios.delayAfterCreate(objectIndex: 1) == nil)
    }

    @Test func adaptiveGrowsAndBacksOff() {
        var policy = AdaptivePacing(initial: 8, maximum: 64)
        #expect(policy.nextBurst(packetsLeftInObject: 17) == PacingBurst(packets: 8, checkpoint: .checksum))
        policy.record(.clean)
        policy.record(.clean)
        #expect(policy.interval == 32)
        policy.record(.clean)
        policy.record(.clean)
        #expect(policy.interval == 64)
        policy.record(.shortfall)
        #expect(policy.interval == 32)
        policy.record(.mismatch)
        #expect(policy.interval == 16)
        policy.slowDown()
        #expect(policy.interval == 1)
        policy.record(.clean)
        policy.record(.clean)
        policy.record(.clean)
        policy.record(.clean)
        #expect(policy.interval == 8)  // the ceiling after slowing down
    }

    @Test func slowDownShrinksBursts() {
        var prn = ReceiptPacing(interval: 12)
        prn.slowDown()
        #expect(prn.packetReceiptInterval == 6)
        var burst = BurstPacing(packets: 12, pause: .milliseconds(100))
        burst.slowDown()
        #expect(
            burst.nextBurst(packetsLeftInObject: 100)
                == PacingBurst(packets: 6, checkpoint: .none, pause: .milliseconds(200)))
        var object = ObjectPacing()
        #expect(object.nextBurst(packetsLeftInObject: 17) == PacingBurst(packets: 17, checkpoint: .none))
        object.slowDown()
        #expect(object.nextBurst(packetsLeftInObject: 17) == PacingBurst(packets: 4, checkpoint: .checksum))
    }
}
