import Testing

@testable import SecureDFU

/// Paced bursts (issue 18 point 2): once the device is known to take only so many packets back to back, the
/// bursts of an object are paced by a learned pause instead of a checkpoint's round trip each.
@Suite(.timeLimit(.minutes(5))) struct AdaptivePacedBurstTests {
    static let objectPackets = 17

    /// A device that takes `limit` packets back to back and needs `pause` per packet between bursts (its flash
    /// catching up: the host's pace must be at most one packet per `pause`).
    struct Device {
        var limit = 12
        var pause: Duration = .milliseconds(8)
    }

    /// One object through the policy against `device`: paced bursts (no checkpoint) are judged at the object's end,
    /// as the engine does (the last burst's receipt or checksum covers the whole object). Returns the bursts.
    static func object(_ policy: inout AdaptiveStreamPacing, _ device: Device) -> [PacingBurst] {
        var left = objectPackets
        var bursts: [PacingBurst] = []
        var lost = false
        while left > 0 {
            var burst = policy.nextBurst(packetsLeftInObject: left)
            burst.packets = min(burst.packets, left)
            bursts.append(burst)
            left -= burst.packets
            if burst.packets > device.limit { lost = true }
            if burst.checkpoint == .none {
                if let pause = burst.pause, pause < device.pause * burst.packets { lost = true }
                continue
            }
            if lost {
                policy.record(.mismatch)  // the engine creates the object again
                left = objectPackets
                lost = false
                bursts.append(PacingBurst(packets: 1, checkpoint: .none))  // marks the retry
            } else {
                policy.record(.clean)
            }
        }
        return bursts
    }

    static func limited(_ device: Device) -> AdaptiveStreamPacing {
        var policy = AdaptiveStreamPacing()
        for _ in 0..<12 { _ = object(&policy, device) }
        return policy
    }

    @Test func aBurstLimitBringsPacedBurstsWithOneCheckpointPerObject() {
        var policy = AdaptiveStreamPacing()
        let device = Device(pause: .milliseconds(1))
        _ = Self.object(&policy, device)  // 4, 8, 5: clean
        _ = Self.object(&policy, device)  // 17 lost: limit 8, pacing starts
        #expect(policy.burstLimit == 8)
        #expect(policy.pause == .milliseconds(2))
        let bursts = Self.object(&policy, device)
        #expect(bursts.map(\.packets) == [8, 8, 1])
        // The pause is per packet of the burst: 8 × 2 ms after a burst of 8 (the link queues the burst at once).
        #expect(bursts[0] == PacingBurst(packets: 8, checkpoint: .none, pause: .milliseconds(16)))
        #expect(bursts[2].checkpoint == .checksum)
        // No probing of longer bursts while paced: a loss would not say whether the burst or the pause was to blame.
        for _ in 0..<6 { _ = Self.object(&policy, device) }
        #expect(policy.burstLimit == 8)
    }

    @Test func thePauseHalvesWhileCleanAndSettlesAboveWhatTheDeviceNeeds() {
        let device = Device(limit: 12, pause: .milliseconds(8))
        var policy = Self.limited(device)
        var losses = 0
        for _ in 0..<30 {
            losses += Self.object(&policy, device).filter { $0 == PacingBurst(packets: 1, checkpoint: .none) }.count
        }
        let pause = try? #require(policy.pause)
        #expect(pause.map { $0 >= .milliseconds(8) } == true, "\(String(describing: policy.pause))")
        #expect(pause.map { $0 <= .milliseconds(12) } == true, "\(String(describing: policy.pause))")
        #expect(losses <= 2)
        // Receipts end the objects once enough were clean; the learned pause survives into the next connection.
        #expect(Self.object(&policy, device).last?.checkpoint == .packetReceipt)
        let resumed = AdaptiveStreamPacing(resuming: policy.snapshot)
        #expect(resumed.pause == policy.pause)
        #expect(resumed.burstLimit == policy.burstLimit)
    }

    @Test func aLossInAPacedObjectRaisesThePauseNotTheDelay() {
        var policy = Self.limited(Device(pause: .zero))
        let delay = policy.prepareDelay
        let limit = policy.burstLimit
        let before = try? #require(policy.pause)
        // Paced bursts, then the object's checkpoint finds the object broken.
        var left = Self.objectPackets
        var burst = policy.nextBurst(packetsLeftInObject: left)
        while burst.checkpoint == .none {
            #expect(burst.pause == before)
            left -= burst.packets
            burst = policy.nextBurst(packetsLeftInObject: left)
        }
        policy.record(.mismatch)
        #expect(policy.pauseTooShort == before)
        #expect(policy.pause == (before == .zero ? .milliseconds(2) : before.map { $0 * 2 }))
        #expect(policy.prepareDelay == delay)
        #expect(policy.delayTooShort == nil)
        #expect(policy.burstLimit == limit)
    }

    @Test func aDeviceThatNeedsMoreThanTheLargestPauseGetsCheckpointsAgain() {
        let device = Device(limit: 12, pause: .milliseconds(40))
        var policy = Self.limited(device)
        for _ in 0..<10 { _ = Self.object(&policy, device) }
        #expect(policy.pause == nil)
        #expect(policy.pacingEnded)
        let bursts = Self.object(&policy, device)
        #expect(bursts.first?.checkpoint == .checksum)
        // The pre-issue-18 tuning never paces.
        var old = AdaptiveStreamPacing(tuning: .erasing)
        for _ in 0..<12 { _ = Self.object(&old, device) }
        #expect(old.pause == nil && !old.pacingEnded)
    }
}
