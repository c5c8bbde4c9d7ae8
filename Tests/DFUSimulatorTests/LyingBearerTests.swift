import ATT
import BLECore
import GATT
import Testing

@testable import DFUSimulator

/// The rewriting rules of `LyingBearer`, PDU by PDU (the engine's reaction is in SecureDFUTests/LyingDeviceTests).
@Suite struct LyingBearerTests {
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

    @Test func oversizeWrongHandleAndMTU() throws {
        let oversize = liar([.oversizePDU]).rewrite(Self.created)
        #expect(oversize.first?.count == 600)
        #expect(Array(oversize.first?.prefix(6) ?? []) == Self.created)
        // Notification on 0x0011 instead of 0x0010.
        #expect(liar([.wrongHandle]).rewrite(Self.created) == [[0x1B, 0x11, 0x00, 0x60, 0x01, 0x01]])
        // Exchange MTU Response, Server Rx MTU 247 → 20.
        #expect(liar([.mtuBelow23]).rewrite([0x03, 0xF7, 0x00]) == [[0x03, 0x14, 0x00]])
        // A Write Response passes unchanged.
        #expect(liar(DeviceLie.allCases).rewrite([0x13]) == [[0x13]])
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
