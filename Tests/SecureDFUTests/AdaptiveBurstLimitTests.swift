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

    @Test func oneCleanObjectDoesNotProveADelay() {
        // A delay at the edge passes now and then: 17 got through once, so a loss of 17 at the same delay is not
        // yet the burst's length.
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        _ = Self.object(&policy, fails: { _ in false })  // 4, 8, 5
        _ = Self.object(&policy, fails: { _ in false })  // 17 got through once
        let delay = policy.prepareDelay
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.record(.mismatch)
        #expect(policy.delayTooShort == delay)
        #expect(policy.prepareDelay == delay * 2)
        #expect(policy.burstLimit == nil)
    }

    /// The lossy bracelet: three objects of 17 back to back at one delay prove it; then a loss the engine located
    /// in the burst is the burst's length, and the limit is what the device took before it.
    @Test func aLocatedLossAtAProvenDelayLimitsBurstsToWhatTheDeviceTook() {
        var policy = AdaptiveStreamPacing(tuning: AdaptiveStreamPacing.Tuning(initialDelay: .milliseconds(80), confirmObjects: 3, pauseStep: nil))
        _ = Self.object(&policy, fails: { _ in false })  // 4, 8, 5 at 80 ms
        _ = Self.object(&policy, fails: { _ in false })  // 17
        _ = Self.object(&policy, fails: { _ in false })  // 17: 80 ms halves to 40 (nothing lost yet)
        #expect(policy.prepareDelay == .milliseconds(40))
        for _ in 0..<3 { _ = Self.object(&policy, fails: { _ in false }) }  // 17 × 3 at 40 ms: proven for 17
        #expect(policy.prepareDelay == .milliseconds(20))
        // At 20 ms (not proven): a loss located at the second packet is the delay's.
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.lossLocated(atPacket: 1)
        policy.record(.mismatch)
        #expect(policy.delayTooShort == .milliseconds(20))
        #expect(policy.prepareDelay == .milliseconds(40))
        #expect(policy.burstLimit == nil)
        // Back at the proven 40 ms with half the interval (8): a loss located at packet 6 means the device took 6
        // back to back.
        #expect(policy.nextBurst(packetsLeftInObject: Self.objectPackets).packets == 8)
        policy.lossLocated(atPacket: 6)
        policy.record(.mismatch)
        #expect(policy.burstLimit == 6)
        #expect(policy.burstTooLong == 8)
        #expect(policy.prepareDelay == .milliseconds(40))
        #expect(policy.nextBurst(packetsLeftInObject: Self.objectPackets).packets == 6)
    }

    @Test func aLossRightAfterCreateAtAnUnprovenDelayIsTheDelaysNotTheLength() {
        // The lossy bracelet before loss location: 17 lost at its second packet after 40 ms was blamed on the length and the
        // limit fell to 1 (467 checkpoints per 128 KiB). Located, it raises the delay.
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        _ = Self.object(&policy, fails: { _ in false })  // 4, 8, 5 at 40 ms
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)  // 17
        policy.lossLocated(atPacket: 1)
        policy.record(.mismatch)
        #expect(policy.burstLimit == nil)
        #expect(policy.prepareDelay == .milliseconds(80))
        #expect(policy.nextBurst(packetsLeftInObject: Self.objectPackets).packets >= 8)
    }
}
