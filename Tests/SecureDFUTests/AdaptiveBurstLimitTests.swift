import Testing

@testable import SecureDFU

/// The sustainable burst: a loss in a burst longer than any clean one is blamed on the burst's length.
@Suite(.timeLimit(.minutes(5))) struct AdaptiveBurstLimitTests {
    static let objectPackets = 17

    /// Sends one object through the policy; `fails(burst)` says whether a burst of that many packets is lost.
    /// Returns the bursts handed out, with their checkpoints.
    static func object(_ policy: inout AdaptiveStreamPacing, fails: (Int) -> Bool) -> [PacingBurst] {
        var left = objectPackets
        var bursts: [PacingBurst] = []
        while left > 0 {
            var burst = policy.nextBurst(packetsLeftInObject: left)
            burst.packets = min(burst.packets, left)
            bursts.append(burst)
            if fails(burst.packets) {
                policy.record(.mismatch)  // the engine creates the object again
                left = objectPackets
                bursts.append(PacingBurst(packets: 1, checkpoint: .none))  // marks the retry
            } else {
                policy.record(.clean)
                left -= burst.packets
            }
        }
        return bursts
    }

    @Test func aTooLongBurstSetsTheLimitAndLeavesTheDelayAlone() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        // A device that takes 12 packets back to back, never more (the lossy bracelet's flash queue).
        let fails = { (packets: Int) in packets > 12 }
        _ = Self.object(&policy, fails: fails)  // 4, 8, 5: clean, now streaming
        #expect(policy.isStreaming)
        let delay = policy.prepareDelay
        _ = Self.object(&policy, fails: fails)  // 17 at once: lost; then bursts of 8
        #expect(policy.burstLimit == 8)
        #expect(policy.burstTooLong == 17)
        #expect(policy.prepareDelay == delay)
        #expect(policy.delayTooShort == nil)
        #expect(!policy.isStreaming)
        #expect(policy.nextBurst(packetsLeftInObject: Self.objectPackets).packets == 8)
    }

    @Test func aLossLaterInAnObjectInABurstOfKnownGoodLengthCapsTheInterval() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        let fails = { (packets: Int) in packets > 12 }
        _ = Self.object(&policy, fails: fails)
        _ = Self.object(&policy, fails: fails)  // limit 8
        let delay = policy.prepareDelay
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)  // 8
        policy.record(.clean)
        #expect(policy.nextBurst(packetsLeftInObject: 9).packets == 8)
        policy.record(.shortfall)  // 8 packets came back clean before: the device fell behind inside the object
        #expect(policy.intervalCap == 4)
        #expect(policy.interval == 4)
        #expect(policy.burstLimit == 8)
        #expect(policy.prepareDelay == delay)
    }

    @Test func theLimitSettlesAtTheLongestBurstTheDeviceTakes() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        let fails = { (packets: Int) in packets > 12 }
        var failures = 0
        for _ in 0..<20 {
            let bursts = Self.object(&policy, fails: fails)
            failures += bursts.filter { $0.checkpoint == .none }.count
        }
        // 8 → probe 12 (clean) → probe 14 (lost) → stays at 12: three losses in all (17, 14, and none more).
        #expect(policy.burstLimit == 12)
        #expect(policy.burstTooLong == 13 || policy.burstTooLong == 14)
        #expect(failures <= 3)
        // Objects now go out as 12 + 5, the last burst ending with the receipt on the object's last packet.
        let bursts = Self.object(&policy, fails: fails)
        #expect(bursts.map(\.packets) == [12, 5])
        #expect(bursts.map(\.checkpoint) == [.checksum, .packetReceipt])
        #expect(policy.packetReceiptInterval == UInt16(Self.objectPackets))
        // The next connection starts at the learned limit.
        let resumed = AdaptiveStreamPacing(resuming: policy.snapshot)
        #expect(resumed.burstLimit == 12)
    }

    @Test func aLoadedHostLettingALongBurstThroughOnceDoesNotMoveTheBlameToTheDelay() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        _ = Self.object(&policy, fails: { _ in false })  // 4, 8, 5
        _ = Self.object(&policy, fails: { _ in false })  // 17 got through once
        let delay = policy.prepareDelay
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.record(.mismatch)  // 17 lost at a delay that already carried objects: the length
        #expect(policy.prepareDelay == delay)
        #expect(policy.delayTooShort == nil)
        #expect(policy.burstLimit == 8)  // the longest clean burst shorter than 17
        #expect(policy.burstTooLong == 17)
    }

    @Test func lossesAtADelayThatCarriedObjectsShortenTheBurstFurther() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        _ = Self.object(&policy, fails: { _ in false })  // 4, 8, 5 clean at 40 ms
        #expect(policy.shortestCleanDelay == .milliseconds(40))
        _ = policy.nextBurst(packetsLeftInObject: 17)
        policy.record(.mismatch)  // 17 > 8: length
        #expect(policy.burstLimit == 8)
        #expect(policy.nextBurst(packetsLeftInObject: 17).packets == 8)
        policy.record(.shortfall)  // 8 lost right after Create, at a delay that carried an object: still length
        #expect(policy.burstLimit == 5)  // the longest clean burst shorter than 8 (4, 8, 5 came back clean)
        #expect(policy.delayTooShort == nil)
        #expect(policy.prepareDelay == .milliseconds(40))
    }
}
