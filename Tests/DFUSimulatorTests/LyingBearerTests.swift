import ATT
import BLECore
import GATT
import TestDoubles
import Testing

@testable import DFUSimulator

/// The rewriting rules of `LyingBearer`, PDU by PDU (the engine's reaction is in SecureDFUTests/LyingDeviceTests).
@Suite(.timeLimit(.minutes(5))) struct LyingBearerTests {
    /// Handle Value Notification on handle 0x0010: 60 03 01 | offset 0x00001000 | CRC 0x11223344
    /// (a Calculate Checksum response: offset 4096).
    static let checksum: [UInt8] = [0x1B, 0x10, 0x00, 0x60, 0x03, 0x01, 0x00, 0x10, 0x00, 0x00, 0x44, 0x33, 0x22, 0x11]
    /// Handle Value Notification on 0x0010: 60 01 01 (Create succeeded).
    static let created: [UInt8] = [0x1B, 0x10, 0x00, 0x60, 0x01, 0x01]

    func liar(_ lies: [DeviceLie], limit: Int? = nil, after: Int = 0) -> LyingBearer {
        LyingBearer(wrapping: InMemoryBearer.makePair().0, plan: LiePlan(lies, limit: limit, after: after))
    }

    @Test func wrongOffsetAddsOneToTheReportedOffset() {
        let bearer = liar([.wrongOffset])
        // offset 0x00001001, CRC unchanged
        #expect(bearer.rewrite(Self.checksum) == [[0x1B, 0x10, 0x00, 0x60, 0x03, 0x01, 0x01, 0x10, 0x00, 0x00, 0x44, 0x33, 0x22, 0x11]])
        #expect(bearer.rewrite(Self.created) == [Self.created])
        #expect(bearer.liesTold(.wrongOffset) == 1)
    }

    @Test func wrongCRCFlipsTheLowestBit() {
        let bearer = liar([.wrongCRC])
        // CRC 0x11223345
        #expect(bearer.rewrite(Self.checksum) == [[0x1B, 0x10, 0x00, 0x60, 0x03, 0x01, 0x00, 0x10, 0x00, 0x00, 0x45, 0x33, 0x22, 0x11]])
    }

    @Test func duplicatesAndLateAnswers() {
        let duplicating = liar([.duplicatedResponses])
        #expect(duplicating.rewrite(Self.created) == [Self.created, Self.created])
        let late = liar([.outOfOrderResponses])
        #expect(late.rewrite(Self.created) == [Self.created])  // nothing earlier to resend yet
        #expect(late.rewrite(Self.checksum) == [Self.checksum, Self.created])
    }

    @Test func oversizeAndWrongHandle() throws {
        // Before any MTU exchange ATT_MTU is 23: the notification is padded with zeros to 24 octets.
        let oversize = liar([.oversizePDU]).rewrite(Self.created)
        #expect(oversize == [Self.created + [UInt8](repeating: 0, count: 18)])
        #expect(oversize.first?.count == 24)
        // Notification on 0x0011 instead of 0x0010.
        #expect(liar([.wrongHandle]).rewrite(Self.created) == [[0x1B, 0x11, 0x00, 0x60, 0x01, 0x01]])
        // A Write Response passes unchanged.
        #expect(liar(DeviceLie.allCases).rewrite([0x13]) == [[0x13]])
    }

    /// The liar follows the MTU exchange passing through it: ATT_MTU = min(Client Rx MTU, Server Rx MTU), at least 23.
    @Test func oversizeFollowsTheExchangedMTU() async throws {
        let (host, device) = InMemoryBearer.makePair()
        let bearer = LyingBearer(wrapping: device, plan: LiePlan([.oversizePDU]))
        try await host.send([0x02, 0xF7, 0x00])  // Exchange MTU Request, Client Rx MTU 247
        #expect(try await bearer.receive() == [0x02, 0xF7, 0x00])
        #expect(bearer.rewrite([0x03, 0x05, 0x02]) == [[0x03, 0x05, 0x02]])  // Server Rx MTU 517 passes
        #expect(bearer.attMTU == 247)
        #expect(bearer.rewrite(Self.created).first?.count == 248)
    }

    /// mtu-below-23: the host reads a Server Rx MTU of 20 while the device is told Client Rx MTU 23, so both sides
    /// use ATT_MTU 23.
    @Test func mtuBelow23() async throws {
        let (host, device) = InMemoryBearer.makePair()
        let bearer = LyingBearer(wrapping: device, plan: LiePlan([.mtuBelow23]))
        try await host.send([0x02, 0xF7, 0x00])  // Exchange MTU Request, Client Rx MTU 247
        #expect(try await bearer.receive() == [0x02, 0x17, 0x00])  // the device reads Client Rx MTU 23
        #expect(bearer.rewrite([0x03, 0xF7, 0x00]) == [[0x03, 0x14, 0x00]])  // Server Rx MTU 247 → 20
        #expect(bearer.attMTU == 23)
        #expect(bearer.liesTold(.mtuBelow23) == 1)
    }

    @Test func theLimitCountsEveryLie() {
        let bearer = liar([.wrongCRC, .duplicatedResponses], limit: 2)
        #expect(bearer.rewrite(Self.checksum).count == 2)  // CRC lie + duplicate
        #expect(bearer.rewrite(Self.checksum) == [Self.checksum])
        #expect(bearer.liesTold == 2)
    }

    @Test func liesStartAfterTheHonestResponses() {
        let bearer = liar([.wrongCRC], after: 1)
        #expect(bearer.rewrite(Self.checksum) == [Self.checksum])
        #expect(bearer.rewrite(Self.checksum) != [Self.checksum])
        #expect(bearer.liesTold == 1)
    }

    @Test func parsesPlans() throws {
        let plan = try LiePlan(parsing: "wrong-crc, duplicate,times=3,after=9")
        #expect(plan == LiePlan([.wrongCRC, .duplicatedResponses], limit: 3, after: 9))
        #expect(throws: FaultPlanError.self) { try LiePlan(parsing: "fib") }
        #expect(throws: FaultPlanError.self) { try LiePlan(parsing: "times=x") }
    }
}
