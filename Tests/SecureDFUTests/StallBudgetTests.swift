import BLECore
import DFUProtocol
import Testing

@testable import SecureDFU

/// Issue 18 point 1: the retry budget counts time and progress, not attempts.
@Suite(.timeLimit(.minutes(2))) struct StallBudgetTests {
    /// Checkpoint failures: the first retry goes out at once, then 50 ms doubling up to 1 s; with 10 s and 6 tries
    /// the 16th try gives up (0.05 + 0.1 + 0.2 + 0.4 + 0.8 + 9 × 1 = 10.55 s waited).
    @Test func checkpointFailuresWaitLongerAndLongerThenGiveUp() {
        var budget = StallBudget(limit: .seconds(10), minimumTries: 6)
        var verdicts: [StallBudget.Verdict] = []
        for _ in 1...16 { verdicts.append(budget.failed(deviceBusy: false)) }
        let ms: (Int) -> StallBudget.Verdict = { .retryAfter(.milliseconds($0)) }
        #expect(
            verdicts
                == [.retryNow, ms(50), ms(100), ms(200), ms(400), ms(800)] + Array(repeating: ms(1000), count: 9)
                + [.giveUp])
        #expect(budget.waited == .milliseconds(10_550))
        #expect(budget.summary == "no new data past offset 0 in 16 tries over 10.55 s")
    }

    /// A refused Create waits from the first refusal: retrying at once only meets the same full queue.
    @Test func aBusyDeviceIsWaitedForFromTheFirstRefusal() {
        var budget = StallBudget(limit: .seconds(10), minimumTries: 6)
        let first = budget.failed(deviceBusy: true)
        let second = budget.failed(deviceBusy: true)
        #expect(first == .retryAfter(.milliseconds(50)))
        #expect(second == .retryAfter(.milliseconds(100)))
    }

    /// Progress (the offset moved since the last report, or since a Create rewound it) starts the budget afresh; a
    /// report that did not move it does not.
    @Test func progressStartsTheBudgetAfresh() {
        var budget = StallBudget(limit: .seconds(10), minimumTries: 6)
        let first = budget.confirmed(4096)
        #expect(first)
        for _ in 1...12 { _ = budget.failed(deviceBusy: false) }
        #expect(budget.tries == 12)
        let same = budget.confirmed(4096)
        #expect(!same)
        #expect(budget.tries == 12)
        // An object created again: back at 4096 - 4096 = 0; 2048 confirmed after it is the offset moving.
        budget.rewound(to: 0)
        let afterRewind = budget.confirmed(2048)
        #expect(afterRewind)
        #expect(budget.tries == 0)
        #expect(budget.waited == .zero)
        #expect(budget.mark == 4096)
        let next = budget.failed(deviceBusy: false)
        #expect(next == .retryNow)
    }

    /// Ground covered again and again without a new furthest offset (an object that always fails at the same
    /// place, created again each time) ends too: after 64 × 6 failed tries that did not move the offset, below the
    /// mark.
    @Test func repeatedGroundEndsAfterManyTriesBelowTheMark() {
        var budget = StallBudget(limit: .seconds(10), minimumTries: 6)
        _ = budget.confirmed(3000)
        var verdicts: [StallBudget.Verdict] = []
        for _ in 1...384 {
            budget.rewound(to: 0)
            _ = budget.confirmed(2000)  // moved: no wait, tries start afresh
            verdicts.append(budget.failed(deviceBusy: false))  // the mismatch after it
        }
        #expect(verdicts.dropLast().allSatisfy { $0 == .retryNow })
        #expect(verdicts.last == .giveUp)
        #expect(budget.summary == "no data past offset 3000 in 384 tries")
    }

    /// Both conditions: many quick tries do not give up before the time, and much time does not give up before the
    /// tries (two checkpoint timeouts of 10 s count 20 s, yet only 2 tries).
    @Test func givingUpNeedsTimeAndTries() {
        var budget = StallBudget(limit: .seconds(10), minimumTries: 6)
        var verdicts: [StallBudget.Verdict] = []
        for _ in 1...2 {
            budget.timedOut(after: .seconds(10))
            verdicts.append(budget.failed(deviceBusy: false, waitedAlready: true))
        }
        for _ in 3...6 { verdicts.append(budget.failed(deviceBusy: false, waitedAlready: true)) }
        #expect(verdicts == Array(repeating: .retryNow, count: 5) + [.giveUp])
        var quick = StallBudget(limit: .seconds(10), minimumTries: 6)
        var quickVerdicts: [StallBudget.Verdict] = []
        for _ in 1...6 { quickVerdicts.append(quick.failed(deviceBusy: false, waitedAlready: true)) }
        #expect(!quickVerdicts.contains(.giveUp))
    }
}

/// The three cases of issue 18 point 1 as conversation scripts (host sends X, device answers Y).
@Suite(.timeLimit(.minutes(2))) struct PatienceScriptTests {
    let part = testPart(imageSize: 8192, initSize: 141)
    var initCRC: UInt32 { CRC32.checksum(part.initPacket) }
    func crc(_ n: Int) -> UInt32 { CRC32.checksum(part.image[0..<n]) }

    /// Up to the first Create Data, answered by the device with 0x05 (Invalid Object).
    func refusedFirstCreate(_ machine: inout SecureDFUStateMachine) {
        play(
            &machine,
            [
                (.started(mtu: 247), [.request(.select(.command))]),
                (Device.select(512, 0, 0), [.request(.create(type: .command, size: 141))]),
                (Device.ok(.create), [.request(.setPRN(0))]),
                (Device.ok(.setPRN), [.packets(0..<141, count: 1)]),
                (.packetsSent, [.request(.calculateChecksum)]),
                (Device.checksum(141, initCRC), [.request(.execute)]),
                (Device.ok(.execute), [.request(.setPRN(0))]),
                (Device.ok(.setPRN), [.request(.select(.data))]),
                (Device.select(4096, 0, 0), [.request(.create(type: .data, size: 4096))]),
            ])
    }

    /// SDK 15-17 answer Create Data with 0x05 when the page erase cannot be queued (`on_data_obj_create_request`):
    /// the engine waits (a timer, nothing sent meanwhile) and creates the object again; it used to fail with
    /// "Create (0x01) refused: invalid object".
    @Test func aRefusedCreateIsWaitedOutAndSentAgain() {
        var machine = SecureDFUStateMachine(part: part, configuration: SecureDFUConfiguration(pacing: ObjectPacing()))
        refusedFirstCreate(&machine)
        var waits: [Duration] = []
        for _ in 0..<3 {
            // 60 01 05: Create, Invalid Object.
            let actions = machine.handle(Device.refused(.create, 0x05))
            guard actions.count == 1, case .startTimer(let timer, let wait)? = actions.first else {
                Issue.record("expected a wait, got \(actions)")
                return
            }
            waits.append(wait)
            #expect(steps(machine.handle(.timerFired(timer))) == [.request(.create(type: .data, size: 4096))])
        }
        #expect(waits == [.milliseconds(50), .milliseconds(100), .milliseconds(200)])
        play(
            &machine,
            [
                (Device.ok(.create), [.packets(0..<4096, count: 17)]),
                (.packetsSent, [.request(.calculateChecksum)]),
                (Device.checksum(4096, crc(4096)), [.request(.execute)]),
                (Device.ok(.execute), [.executed(0), .request(.create(type: .data, size: 4096))]),
            ])
        #expect(machine.retries == 3)
        #expect(!machine.isFinished)
    }

    /// A device that keeps refusing gives up, with the refusal and the budget in one line.
    @Test func aDeviceThatNeverDrainsIsGivenUpOn() {
        var machine = SecureDFUStateMachine(part: part, configuration: SecureDFUConfiguration(pacing: ObjectPacing()))
        refusedFirstCreate(&machine)
        var waited = Duration.zero
        var failure: DFUEngineError?
        for _ in 0..<100 {
            let actions = machine.handle(Device.refused(.create, 0x05))
            if case .failed(let error)? = actions.last {
                failure = error
                break
            }
            guard case .startTimer(let timer, let wait)? = actions.first else { break }
            waited += wait
            _ = machine.handle(.timerFired(timer))
        }
        #expect(failure?.code == .gaveUp)
        #expect(failure?.request == .create)
        #expect(
            failure?.reason
                == "gave up: no new data past offset 0 in 15 tries over 10.55 s; last: Create (0x01) refused: invalid object (0x05)",
            "\(String(describing: failure))")
        #expect(waited == .milliseconds(10_550))
    }

    /// Shortfalls that move the offset are progress, not failures: a device that takes only the first packet of
    /// every burst (its flash is slower than the link) never costs the engine a wait or a try of its budget, while
    /// the pacing still slows down (bursts of 4, then 2, then 1).
    @Test func shortfallsThatMoveTheOffsetAreNotFailures() {
        var machine = SecureDFUStateMachine(
            part: part, configuration: SecureDFUConfiguration(pacing: ChecksumPacing(interval: 4)))
        refusedFirstCreate(&machine)
        var next = steps(machine.handle(Device.ok(.create)))
        var shortfalls = 0
        var bursts: [Int] = []
        while case .packets(let span, let count)? = next.last, span.upperBound <= 4096, bursts.count < 40 {
            bursts.append(count)
            let kept = min(span.upperBound, span.lowerBound + 244)
            if kept < span.upperBound { shortfalls += 1 }
            next = steps(machine.handle(.packetsSent))
            if next == [.request(.calculateChecksum)] {
                next = steps(machine.handle(Device.checksum(kept, crc(kept))))
            }
            #expect(machine.stall.tries == 0, "at \(kept)")
            if kept == 4096 { break }
        }
        #expect(shortfalls >= 6)
        #expect(Array(bursts.prefix(7)) == [4, 4, 4, 2, 2, 2, 1])
        #expect(!machine.isFinished)
        #expect(machine.stall.mark == 4096)
    }
}
