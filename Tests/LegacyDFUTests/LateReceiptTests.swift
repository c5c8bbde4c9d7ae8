import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// A window's receipt that comes after the receipt timeout, on InfiniTime (no Report Received Image Size): the engine
/// against the virtual watch's `InfiniTimeDFU`, with the interleaving injected (the receipt is held back while the
/// engine's timer fires), not left to the scheduler.
///
/// The failure this pins: under load the packets of a 512-packet window sat in the link for more than the 2 s receipt
/// timeout; the engine asked `07`, which InfiniTime's `ControlPointHandler` ignores without an answer; the receipt
/// (`11 <20320>`) then came while the engine waited for the size and was dropped: "timeout: no answer within 10.0
/// seconds after 20320 of 65536 bytes".
@Suite(.timeLimit(.minutes(5))) struct LateReceiptTests {
    typealias Watch = InfiniTimeConversationTests.Watch

    struct Run {
        var engine: LegacyDFUStateMachine
        var watch = Watch()
        var requests: [LegacyRequest] = []
        var timer: (LegacyTimer, Duration)?
        var result: Result<Void, LegacyDFUError>?
        /// Notifications of the watch not yet delivered to the engine.
        var inbox: [[UInt8]] = []
        var windows: [Int] = []

        init() {
            var configuration = LegacyDFUConfiguration()
            LegacyDetection.configure(&configuration, for: .applicationService(version: .sdk11))
            engine = LegacyDFUStateMachine(
                part: LegacyFixture.application(InfiniTimeConversationTests.image), configuration: configuration)
            watch.dfu = InfiniTimeDFU(profile: LegacyFixture.instant(InfiniTimeConversationTests.profile))
        }

        /// Carries out the engine's actions on the watch; the watch's notifications go to the inbox.
        mutating func apply(_ actions: [LegacyDFUAction]) {
            var sent = false
            for action in actions {
                switch action {
                case .writeControlPoint(let request):
                    requests.append(request)
                    inbox += watch.cp(request.encoded)
                case .writePacket(let bytes): inbox += watch.packet(bytes)
                case .sendPackets(let burst):
                    let source = burst.source == .initPacket ? engine.part.initPacket : engine.part.image
                    if burst.source == .firmware { windows.append(burst.packets.count) }
                    for range in burst.packets { inbox += watch.packet(Array(source[range])) }
                    sent = true
                case .startTimer(let t, let duration): timer = (t, watch.now + duration)
                case .completed: result = .success(())
                case .failed(let error): result = .failure(error)
                case .progress: break
                }
            }
            if watch.rebooted, result == nil { apply(engine.handle(.disconnected)) }
            if sent { apply(engine.handle(.packetsSent)) }
        }

        /// Delivers the inbox (and the watch's due answers) until the engine waits; `hold` keeps notifications back.
        mutating func pump(holding hold: ([UInt8]) -> Bool = { _ in false }) -> [[UInt8]] {
            var held: [[UInt8]] = []
            while result == nil {
                inbox += watch.advance(.zero)
                guard !inbox.isEmpty else { break }
                let next = inbox.removeFirst()
                if hold(next) { held.append(next) } else { apply(engine.handle(.notification(next))) }
            }
            return held
        }

        /// The engine's timer fires (device time moves to it).
        mutating func fireTimer() -> [LegacyDFUAction] {
            guard let (t, at) = timer else { return [] }
            timer = nil
            inbox += watch.advance(max(.zero, at - watch.now))
            let actions = engine.handle(.timerFired(t))
            apply(actions)
            return actions
        }
    }

    /// 11 a0 00 00 00: the receipt after 8 packets of 20 bytes (160 bytes).
    static let firstReceipt: [UInt8] = [0x11, 0xA0, 0x00, 0x00, 0x00]

    @Test func lateReceiptConfirmsTheWindowWithoutAskingTheSize() throws {
        var run = Run()
        run.apply(run.engine.handle(.started))
        let held = run.pump { $0 == Self.firstReceipt }
        #expect(held == [Self.firstReceipt], "the watch sent the first window's receipt")
        #expect(run.windows == [8])
        // The receipt timeout (2 s) passes with the receipt still in the link.
        let actions = run.fireTimer()
        #expect(!actions.contains(.writeControlPoint(.reportReceivedImageSize)), "InfiniTime never answers 07")
        #expect(actions.contains { if case .startTimer(_, .seconds(8)) = $0 { true } else { false } })
        #expect(run.result == nil)
        // The receipt arrives: the window is confirmed (late: the next window does not grow), the transfer goes on.
        run.inbox = held + run.inbox
        _ = run.pump()
        #expect(run.windows.prefix(2) == [8, 8])
        let result = try #require(run.result)
        #expect(throws: Never.self) { try result.get() }
        #expect(!run.requests.contains(.reportReceivedImageSize))
        #expect(run.requests.last == .activateAndReset)
        #expect(run.watch.dfu.installed.application?.sha256 == LegacyFixture.sha(InfiniTimeConversationTests.image))
    }

    @Test func noReceiptAtAllTimesOutAfterTheResponseTimeout() throws {
        var run = Run()
        run.apply(run.engine.handle(.started))
        _ = run.pump { $0 == Self.firstReceipt }
        _ = run.fireTimer()
        #expect(run.result == nil)
        let last = run.fireTimer()
        #expect(!last.contains(.writeControlPoint(.reportReceivedImageSize)))
        let result = try #require(run.result)
        #expect(throws: LegacyDFUError.self) { try result.get() }
        if case .failure(let error) = result {
            #expect(error.code == .timeout)
            #expect(error.reason.contains("after 160 of 1000 bytes"), "\(error.reason)")
        }
        #expect(run.watch.now == .seconds(10), "2 s receipt timeout, then 8 s more: the response timeout in all")
    }

    /// No `10 03 01` after the last packet: the engine fails at the response timeout instead of asking `07` and
    /// waiting another 10 s for an answer InfiniTime never sends.
    @Test func noAnswerToTheLastPacketFailsWithoutAskingTheSize() throws {
        var run = Run()
        run.apply(run.engine.handle(.started))
        _ = run.pump { $0 == [0x10, 0x03, 0x01] }
        #expect(run.engine.sentOffset == InfiniTimeConversationTests.image.count)
        let start = run.watch.now
        let actions = run.fireTimer()
        #expect(!actions.contains(.writeControlPoint(.reportReceivedImageSize)))
        #expect(run.watch.now - start == .seconds(10))
        let result = try #require(run.result)
        #expect(throws: LegacyDFUError.self) { try result.get() }
        if case .failure(let error) = result { #expect(error.code == .timeout) }
    }
}
