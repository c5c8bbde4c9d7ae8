import BLECore
import DFUProtocol
import TestDoubles
import Testing

@testable import SecureDFU

/// The state machine against the fake bootloader, in-process, with drops, corruption and link loss.
@Suite(.timeLimit(.minutes(5))) struct LoopTests {
    let part = testPart(imageSize: 10_000)

    @Test(arguments: [
        "adaptive", "prn:4", "checksum:4", "object", "burst:12:100ms", "ios", "android", "nrfutil", "seed-pacing",
        "with-response",
    ])
    func everyPolicyDeliversTheImage(policy: String) throws {
        var loop = Loop(part: part, configuration: SecureDFUConfiguration(pacing: try PacingPolicies.parse(policy)))
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        let delivered = loop.device.firmware == part.image
        #expect(delivered)
        #expect(loop.device.executedOffset == part.image.count)
        #expect(loop.machine.retries == 0)
    }

    /// Checkpoints per policy for 10 000 bytes at MTU 247: objects of 17, 17 and 8 packets of 244 bytes.
    @Test(arguments: [
        ("object", 3, [UInt16(0), 0]),  // one checksum per object
        ("checksum:4", 12, [0, 0]),  // after 4, 8, 12, 16 and at 17; after 4 and at 8
        ("prn:4", 2, [0, 4]),  // PRNs inside objects; the last object ends on a PRN, so no checksum there
        ("with-response", 42, [0, 0]),  // after every packet
        ("seed-pacing", 3, [0, 0]),  // pauses, no checkpoints inside objects
    ])
    func policiesProduceTheirCheckpoints(policy: String, dataChecksums: Int, prnValues: [UInt16]) throws {
        var loop = Loop(part: part, configuration: SecureDFUConfiguration(pacing: try PacingPolicies.parse(policy)))
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded)
        let checksums = loop.requests.filter { $0 == .calculateChecksum }.count
        #expect(checksums == dataChecksums + 1)  // + the init packet's
        let prns = loop.requests.compactMap { if case .setPRN(let v) = $0 { v } else { nil } }
        #expect(prns == prnValues)
    }

    @Test func seedPacingPausesAfterEachBurst() throws {
        var loop = Loop(
            part: part, configuration: SecureDFUConfiguration(pacing: try PacingPolicies.parse("seed-pacing")))
        loop.run()
        let pauses = loop.log.filter {
            if case .startTimer(_, let duration) = $0 { duration == .milliseconds(100) } else { false }
        }
        // 17 packets → pauses after 12 (object 0 and 1); 8 packets → none.
        #expect(pauses.count == 2)
        #expect(loop.timersFired == 2)
    }

    @Test(arguments: ["adaptive", "prn:4", "checksum:4", "object", "ios", "with-response"])
    func recoversFromDroppedPackets(policy: String) throws {
        var device = FakeBootloader()
        device.dropPackets = [3, 20, 21, 40]
        var loop = Loop(
            part: part, configuration: SecureDFUConfiguration(pacing: try PacingPolicies.parse(policy)), device: device)
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        let delivered = loop.device.firmware == part.image
        #expect(delivered)
        #expect(loop.machine.retries >= 1)
        #expect(loop.machine.bytesResent > 0)
    }

    @Test func recreatesACorruptedObject() {
        var device = FakeBootloader()
        device.corruptPackets = [5]
        var loop = Loop(part: part, configuration: SecureDFUConfiguration(pacing: ObjectPacing()), device: device)
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded)
        let delivered = loop.device.firmware == part.image
        #expect(delivered)
        #expect(loop.requests.filter { $0 == .create(type: .data, size: 4096) }.count == 3)  // object 0 twice, object 1
    }

    /// A device that takes no data at all is given up on once it took nothing for the stall timeout (10 s of
    /// waits between the tries, on the engine's timers) and at least 2 × maxAttempts tries: 0, 50, 100, 200, 400,
    /// 800 ms, then 1 s each, so 16 tries (issue 18 point 1; it used to be 6 tries in a row, well under a second).
    @Test func givesUpWhenEveryPacketIsLost() {
        var device = FakeBootloader()
        device.dropPackets = Set(1...100_000)  // the init packet (packet 0) gets through
        var loop = Loop(part: part, configuration: SecureDFUConfiguration(pacing: AdaptivePacing()), device: device)
        loop.run()
        #expect(loop.failure?.code == .gaveUp)
        #expect(loop.machine.retries == 16)
        #expect(loop.waited == .milliseconds(10_550))
        #expect(
            loop.failure?.reason
                == "gave up: no new data past offset 0 in 16 tries over 10.55 s; last: device has 0 of 4096 bytes",
            "\(String(describing: loop.failure))")
    }

    @Test(arguments: [true, false])
    func resumesAfterALinkLoss(keepsProgress: Bool) {
        var first = Loop(part: part, configuration: SecureDFUConfiguration(pacing: ObjectPacing()))
        first.disconnectAfterPackets = 26  // init packet + object 0 (17) + 8 packets of object 1
        first.run()
        #expect(first.failure?.code == .disconnected)
        var device = first.device
        device.disconnect(keepsProgress: keepsProgress)
        var second = Loop(part: part, configuration: SecureDFUConfiguration(pacing: ObjectPacing()), device: device)
        second.run()
        let succeeded = second.succeeded
        #expect(succeeded, "\(String(describing: second.failure))")
        let delivered = second.device.firmware == part.image
        #expect(delivered)
        #expect(!second.requests.contains(.create(type: .command, size: 141)))  // the init packet was kept
        // With progress kept, object 1 continues at 4096 + 8 × 244 without a Create for it.
        let creates = second.requests.filter { if case .create(.data, _) = $0 { true } else { false } }.count
        #expect(creates == (keepsProgress ? 1 : 2))
    }

    @Test func extendedErrorOnTheLoop() {
        var device = FakeBootloader()
        device.executeCommandError = .signatureMissing
        var loop = Loop(part: part, device: device)
        loop.run()
        #expect(loop.failure?.code == .remote)
        #expect(loop.failure?.reason == "Execute (0x04) refused: signature missing (0x08)")
    }
}
