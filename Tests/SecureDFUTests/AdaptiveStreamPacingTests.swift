import DFUPackage
import DFUProtocol
import DFUSimulator
import Testing

@testable import SecureDFU

/// The adaptive write mode as a state machine: checkpoint outcomes in, bursts, PRN and prepare delays out.
@Suite(.timeLimit(.minutes(5))) struct AdaptiveStreamPacingTests {
    /// 17 packets of 244 bytes make one 4096-byte object at ATT_MTU 247.
    static let objectPackets = 17

    /// The default: no prepare delay until something was lost (issue 18 point 3: a link that loses nothing never
    /// waits, and no timer runs for it); the first loss right after Create raises it to one erase step.
    @Test func theDefaultStartsWithoutDelayAndLearnsOneOnTheFirstLoss() {
        var policy = AdaptiveStreamPacing()
        #expect(policy.prepareDelay == .zero)
        #expect(policy.delayAfterCreate(objectIndex: 0) == nil)
        #expect(policy.nextBurst(packetsLeftInObject: Self.objectPackets) == PacingBurst(packets: 4, checkpoint: .checksum))
        policy.record(.mismatch)
        #expect(policy.delayTooShort == .zero)
        #expect(policy.delayAfterCreate(objectIndex: 0) == .milliseconds(40))
        var clean = AdaptiveStreamPacing()
        for _ in 0..<12 {
            _ = clean.nextBurst(packetsLeftInObject: 1)
            clean.record(.clean)
            #expect(clean.delayAfterCreate(objectIndex: 1) == nil)
        }
    }

    /// Tests of the delay's bisection start from one erase step, as the default did before issue 18.
    @Test func startsWithChecksumsAndOneEraseStepOfDelay() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        #expect(policy.packetReceiptInterval == 0)
        #expect(policy.delayAfterCreate(objectIndex: 0) == .milliseconds(40))
        #expect(policy.nextBurst(packetsLeftInObject: Self.objectPackets) == PacingBurst(packets: 4, checkpoint: .checksum))
        #expect(policy.objectPackets == Self.objectPackets)
        #expect(!policy.isStreaming)
    }

    @Test func cleanCheckpointsGrowIntoStreamingWholeObjects() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        var left = Self.objectPackets
        var bursts: [Int] = []
        while left > 0 {
            let burst = policy.nextBurst(packetsLeftInObject: left)
            let sent = min(burst.packets, left)
            bursts.append(sent)
            left -= sent
            policy.record(.clean)
        }
        #expect(bursts == [4, 8, 5])
        #expect(policy.isStreaming)
        // Whole objects, one Calculate Checksum each, until enough objects went through cleanly.
        #expect(policy.packetReceiptInterval == 0)
        #expect(
            policy.nextBurst(packetsLeftInObject: Self.objectPackets)
                == PacingBurst(packets: Self.objectPackets, checkpoint: .checksum))
        #expect(policy.delayAfterCreate(objectIndex: 1) == .milliseconds(40))
    }

    @Test func theDelayHalvesAwayWhileNothingIsLost() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        var delays: [Duration] = []
        for _ in 0..<12 {
            _ = policy.nextBurst(packetsLeftInObject: 1)
            policy.record(.clean)
            delays.append(policy.prepareDelay)
        }
        #expect(delays[2] == .milliseconds(20))
        #expect(delays[5] == .milliseconds(10))
        #expect(delays[8] == .milliseconds(5))
        #expect(delays[11] == .zero)
        #expect(policy.delayAfterCreate(objectIndex: 12) == nil)
    }

    @Test func receiptsReplaceChecksumsAfterCleanObjects() {
        var policy = streaming()  // object 0 closed cleanly
        for _ in 0..<2 {
            #expect(policy.packetReceiptInterval == 0)
            _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
            policy.record(.clean)
        }
        // Three clean objects: receipts, even while a prepare delay is still in use.
        #expect(policy.prepareDelay == .milliseconds(20))
        #expect(policy.usesReceipts)
        #expect(policy.packetReceiptInterval == UInt16(Self.objectPackets))
        #expect(policy.receiptTimeout == .seconds(2))
        #expect(
            policy.nextBurst(packetsLeftInObject: Self.objectPackets)
                == PacingBurst(packets: Self.objectPackets, checkpoint: .packetReceipt))
        // A receipt that carries a loss (the device counted the dropped write): checksums until 3 clean objects.
        policy.record(.mismatch)
        #expect(policy.packetReceiptInterval == 0)
        for _ in 0..<3 {
            #expect(!policy.usesReceipts)
            var left = Self.objectPackets
            while left > 0 {
                left -= min(policy.nextBurst(packetsLeftInObject: left).packets, left)
                policy.record(.clean)
            }
        }
        #expect(policy.usesReceipts)
        #expect(!policy.receiptsBroken)
    }

    @Test func aReceiptThatNeverComesEndsReceiptsForTheConnection() {
        var policy = streaming()
        for _ in 0..<2 {
            _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
            policy.record(.clean)
        }
        #expect(
            policy.nextBurst(packetsLeftInObject: Self.objectPackets)
                == PacingBurst(packets: Self.objectPackets, checkpoint: .packetReceipt))
        // The write was dropped before it was counted (no receive buffer): the receipt timed out.
        policy.record(.timeout)
        #expect(policy.receiptsBroken)
        for _ in 0..<10 {
            _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
            policy.record(.clean)
        }
        #expect(policy.isStreaming)
        #expect(!policy.usesReceipts)
        #expect(policy.nextBurst(packetsLeftInObject: Self.objectPackets).checkpoint == .checksum)
        // The next connection to the same device starts without receipts too.
        #expect(!AdaptiveStreamPacing(resuming: policy.snapshot).usesReceipts)
        #expect(AdaptiveStreamPacing(resuming: policy.snapshot).receiptsBroken)
    }

    @Test func aChecksumTimeoutDoesNotEndReceipts() {
        var policy = streaming()
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)  // a checksum burst
        policy.record(.timeout)
        #expect(!policy.receiptsBroken)
    }

    @Test(arguments: [CheckpointOutcome.shortfall, .mismatch, .timeout])
    func aLossRightAfterCreateRaisesThePrepareDelay(outcome: CheckpointOutcome) {
        var policy = halvedOnce()  // 3 clean objects at 40 ms: the delay tries 20 ms
        #expect(policy.prepareDelay == .milliseconds(20))
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.record(outcome)  // lost at a delay that never carried an object cleanly: the delay is to blame
        #expect(!policy.isStreaming)
        #expect(policy.interval == 8)
        #expect(policy.delayAfterCreate(objectIndex: 1) == .milliseconds(40))
        #expect(policy.delayTooShort == .milliseconds(20))
        #expect(policy.burstLimit == nil)
        #expect(policy.intervalCap == nil)
        #expect(policy.failedCheckpoints == 1)
        #expect(policy.nextBurst(packetsLeftInObject: 10) == PacingBurst(packets: 8, checkpoint: .checksum))
    }

    @Test func aLossLaterInAnObjectCapsTheInterval() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)  // 4 packets
        policy.record(.clean)
        _ = policy.nextBurst(packetsLeftInObject: 13)  // 8 packets
        policy.record(.shortfall)
        #expect(policy.prepareDelay == .milliseconds(40))  // the device took the first burst: not a prepare problem
        // 8 packets is longer than any clean burst (4): the burst's length is to blame.
        #expect(policy.interval == 4)
        #expect(policy.burstLimit == 4)
        for left in [9, 5, 1] {
            _ = policy.nextBurst(packetsLeftInObject: left)
            policy.record(.clean)
        }
        #expect(policy.interval == 4)  // limited until probing longer bursts
    }

    @Test func prepareDelayDoublesPerLossUpToTheMaximum() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        var delays: [Duration] = []
        for _ in 0..<8 {
            _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
            policy.record(.mismatch)  // the engine creates the object again: a fresh object each time
            delays.append(policy.prepareDelay)
        }
        #expect(Array(delays.prefix(4)) == [80, 160, 320, 640].map { Duration.milliseconds($0) })
        #expect(Array(delays.suffix(4)) == [.seconds(1), .seconds(1), .seconds(1), .seconds(1)])
        #expect(policy.interval == 1)
    }

    @Test func oneLossPerObjectCountsForTheDelay() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.record(.shortfall)  // continues inside the same object
        _ = policy.nextBurst(packetsLeftInObject: 16)
        policy.record(.shortfall)
        #expect(policy.prepareDelay == .milliseconds(80))
    }

    @Test func prepareDelayBisectsBetweenTooShortAndEnough() {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        func object(_ outcome: CheckpointOutcome) {
            _ = policy.nextBurst(packetsLeftInObject: 1)
            policy.record(outcome)
        }
        object(.mismatch)  // 40 ms too short
        #expect(policy.prepareDelay == .milliseconds(80))
        for _ in 0..<3 { object(.clean) }  // 80 ms enough: try halfway
        #expect(policy.delayEnough == .milliseconds(80))
        #expect(policy.prepareDelay == .milliseconds(60))
        for _ in 0..<3 { object(.clean) }
        #expect(policy.prepareDelay == .milliseconds(50))
        object(.mismatch)  // 50 ms too short: back to the shortest enough
        #expect(policy.delayTooShort == .milliseconds(50))
        #expect(policy.prepareDelay == .milliseconds(60))
        for _ in 0..<6 { object(.clean) }
        // 60 - 50 is within 30 % of 60: settled. Each probe below a delay that was enough costs the device's loss
        // (an object on a flash queue of 2), so the bisection stops early.
        #expect(policy.prepareDelay == .milliseconds(60))
        #expect(policy.delayEnough == .milliseconds(60))
    }

    @Test func slowDownCapsTheInterval() {
        var policy = streaming()
        policy.slowDown()
        #expect(policy.interval == 1)
        #expect(policy.intervalCap == 2)
        #expect(policy.prepareDelay == .milliseconds(80))
        _ = policy.nextBurst(packetsLeftInObject: 100)
        policy.record(.clean)
        _ = policy.nextBurst(packetsLeftInObject: 98)
        policy.record(.clean)
        #expect(policy.interval == 2)
        #expect(!policy.isStreaming)
    }

    @Test func snapshotCarriesTheLearnedStateToTheNextConnection() {
        var policy = halvedOnce()
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.record(.shortfall)
        let resumed = AdaptiveStreamPacing(resuming: policy.snapshot)
        #expect(resumed.snapshot == policy.snapshot)
        #expect(resumed.prepareDelay == .milliseconds(40))
        #expect(resumed.delayTooShort == .milliseconds(20))
        #expect(resumed.interval == policy.interval)
        #expect(resumed.receiptsBroken == false)
    }

    @Test func adaptiveIsTheParsedDefault() throws {
        let policy = try PacingPolicies.parse("adaptive")
        #expect(policy is AdaptiveStreamPacing)
        #expect(policy.description == "adaptive")
    }

    /// The whole engine with this policy against the simulator's bootloader (pure, no time): the image arrives,
    /// and after three clean objects every full object ends with a receipt instead of a Calculate Checksum.
    @Test func engineStreamsObjectsWithReceipts() throws {
        let image = testBytes(80_000, seed: 5)  // 20 objects, the last one short
        let part = Self.part(image)
        let device = BootloaderStateMachine(profile: try SimulatorFixture.profile(), faults: .none)
        var loop = SimulatorLoop(
            part: part, device: device, configuration: SecureDFUConfiguration(pacing: AdaptiveStreamPacing()))
        loop.run()
        #expect(loop.succeeded, "\(loop)")
        let checksums = loop.requests.filter { $0 == .calculateChecksum }.count
        // init packet 1; object 0: 3 (4, 8, 5 packets); objects 1-2 streamed with one checksum each; objects 3-18
        // end with the receipt on their last packet (PRN 17); the short last object cannot: 1.
        #expect(checksums == 7)
        #expect(loop.requests.contains(.setPRN(17)))
        #expect(loop.engine.bytesResent == 0)
    }

    static func part(_ image: [UInt8]) -> DFUPart {
        let command = InitCommand(
            fwVersion: 2, hwVersion: 52, sdReq: [0xB7], type: .application, sdSize: 0, blSize: 0,
            appSize: UInt32(image.count),
            hash: ImageHash(type: .sha256, bytes: Array(DFUSimulatorDigest.sha256(image).reversed())), isDebug: false,
            bootValidation: [BootValidation(type: .crc)])
        return DFUPart(name: "application", initPacket: SecureInitPacket(command: command).encode(), image: image)
    }

    /// ``streaming()`` and one more object in one clean burst (the longest clean burst is a whole object).
    func streamedOnce() -> AdaptiveStreamPacing {
        var policy = streaming()
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.record(.clean)
        return policy
    }

    /// ``streamedOnce()`` and one more clean object: three at 40 ms, so the delay tries 20 ms.
    func halvedOnce() -> AdaptiveStreamPacing {
        var policy = streamedOnce()
        _ = policy.nextBurst(packetsLeftInObject: Self.objectPackets)
        policy.record(.clean)
        return policy
    }

    func streaming() -> AdaptiveStreamPacing {
        var policy = AdaptiveStreamPacing(tuning: .erasing)
        for left in [17, 13, 5] {
            _ = policy.nextBurst(packetsLeftInObject: left)
            policy.record(.clean)
        }
        return policy
    }
}

extension AdaptiveStreamPacing.Tuning {
    /// A prepare delay of one erase step from the start and checkpoints between limited bursts (the default before
    /// issue 18 started the delay at zero and paced the bursts).
    static let erasing = AdaptiveStreamPacing.Tuning(initialDelay: .milliseconds(40), pauseStep: nil)
}
