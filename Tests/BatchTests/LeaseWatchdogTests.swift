import BLECore
import Foundation
import Synchronization
import TestDoubles
import Testing

@testable import Batch

/// A station whose heartbeat no longer reaches the database must stop before its lease runs out: the watchdog calls
/// `leaseLost` once no heartbeat has succeeded for 0.6 of the lease, on the injected clock (no real waiting).
@Suite(.timeLimit(.minutes(3))) struct LeaseWatchdogTests {
    /// Holds every flash until released, and says when one started.
    final class GateFlasher: DeviceFlasher {
        let started = AsyncStream<Void>.makeStream()
        let gate = Mutex<[CheckedContinuation<Void, Never>]>([])

        func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async -> DeviceProbe {
            DeviceProbe(mode: .application, applicationVersion: afterUpdate ? 2 : 1)
        }

        func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
            await withCheckedContinuation { continuation in
                gate.withLock { $0.append(continuation) }
                started.continuation.yield()
            }
            return FlashOutcome(success: true, exitCode: 0, bytes: 1000)
        }

        func release() { for waiter in gate.withLock({ list in defer { list = [] }; return list }) { waiter.resume() } }
    }

    @Test func aSilentHeartbeatStopsTheStationBeforeItsLeaseRunsOut() async throws {
        let (log, url) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(url) }
        let clock = ManualClock()
        let flasher = GateFlasher()
        let lost = Mutex<[String]>([])
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci0", 1)]), packages: ["bracelet": Fixture.package], flasher: flasher, log: log, batch: "line",
            station: StationInfo(name: "s1", host: "h", pid: 1, adapters: "hci0×1", planHash: "p", lease: 9))
        scheduler.clock = clock
        scheduler.now = { Date(timeIntervalSince1970: 1_800_000_000 + Double(clock.now.offset.components.seconds) + Double(clock.now.offset.components.attoseconds) / 1e18) }
        scheduler.leaseLost = { reason in lost.withLock { $0.append(reason) } }
        let run = Task { try await scheduler.run(targets: Fixture.targets(1)) }
        var iterator = flasher.started.stream.makeAsyncIterator()
        _ = await iterator.next()
        // Heartbeats every 3 s, the watchdog every 2.25 s: 12 s of working heartbeats, no alarm.
        for _ in 0..<16 {
            await clock.waitForSleepers(2)
            clock.advance(by: .milliseconds(750))
        }
        await clock.waitForSleepers(2)
        #expect(lost.withLock { $0 }.isEmpty)
        // The database stops taking heartbeats (the stations table is gone): 0.6 × 9 s later the watchdog calls.
        try await log.database.transaction(write: true) { s in try await s.execute("DROP TABLE stations", []) }
        var steps = 0
        while lost.withLock({ $0.isEmpty }), steps < 40 {
            clock.advance(by: .milliseconds(750))
            await clock.waitForSleepers(2)
            steps += 1
        }
        let silence = Double(steps) * 0.75
        #expect(lost.withLock { $0.count } == 1)
        #expect(silence >= 9 * 0.6 - 3 && silence < 9, "called after \(silence) s of failed heartbeats, before the 9 s lease ran out")
        #expect(lost.withLock { $0.first ?? "" }.contains("lease 9 s"))
        flasher.release()
        _ = try? await run.value
    }

    /// Holds every flash until it is cancelled (and says so), like a `bledfu flash` child the station kills.
    final class CancellableFlasher: DeviceFlasher {
        let started = AsyncStream<Void>.makeStream()
        let state = Mutex<(cancelled: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

        func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async -> DeviceProbe {
            DeviceProbe(mode: .application, applicationVersion: afterUpdate ? 2 : 1)
        }

        func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
            progress(DeviceProgress(stage: "uploading", bytes: 300, total: 1000))
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let now = state.withLock { state in
                        if !state.cancelled { state.waiters.append(continuation) }
                        return state.cancelled
                    }
                    if now { continuation.resume() }
                    started.continuation.yield()
                }
            } onCancel: {
                for waiter in state.withLock({ state in
                    state.cancelled = true
                    defer { state.waiters = [] }
                    return state.waiters
                }) { waiter.resume() }
            }
            return FlashOutcome(success: true, exitCode: 0, bytes: 1000)
        }

        var wasCancelled: Bool { state.withLock { $0.cancelled } }
    }

    /// A station whose device another station took over (its lease ran out while it was paused) learns it from its
    /// next heartbeat: it stops that device's flash (the attempt is cancelled), records nothing about it, and ends
    /// once the taker has finished the device. The taker's record stands.
    @Test func aDeviceTakenOverStopsItsFlashAndIsNotRecorded() async throws {
        let (log, url) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(url) }
        let clock = ManualClock()
        let flasher = CancellableFlasher()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let messages = Mutex<[String]>([])
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci0", 1)]), packages: ["bracelet": Fixture.package], flasher: flasher, log: log, batch: "line",
            station: StationInfo(name: "s1", host: "h", pid: 1, adapters: "hci0×1", planHash: "p", lease: 9))
        scheduler.clock = clock
        scheduler.now = { t0 + Double(clock.now.offset.components.seconds) + Double(clock.now.offset.components.attoseconds) / 1e18 }
        scheduler.events = { event in if case .message(let text) = event { messages.withLock { $0.append(text) } } }
        let run = Task { try await scheduler.run(targets: Fixture.targets(1)) }
        var iterator = flasher.started.stream.makeAsyncIterator()
        _ = await iterator.next()
        let address = Fixture.address(1).description
        // s1 is paused (no heartbeat); at t0+60 station s2 takes the device over and starts its own attempt.
        let s2 = StationInfo(name: "s2", host: "h2", pid: 2, adapters: "hci1×1", planHash: "p", lease: 9)
        let runB = try await log.startRun(batch: "line", station: s2, force: false, at: t0 + 60)
        #expect(try await log.claimNext(batch: "line", station: "s2", classes: ["bracelet"], lease: 600, at: t0 + 60)?.address == address)
        let taker = try await log.beginAttempt(run: runB, batch: "line", address: address, adapter: "hci1", station: "s2", at: t0 + 60)
        #expect(!flasher.wasCancelled)
        // s1 resumes: its next heartbeat (every 3 s) finds the device lost and stops its flash.
        var steps = 0
        while !flasher.wasCancelled, steps < 20 {
            await clock.waitForSleepers(2)
            clock.advance(by: .seconds(1))
            steps += 1
        }
        #expect(flasher.wasCancelled, "the heartbeat cancelled the flash of the device taken over")
        // s1 recorded nothing: the device is s2's, running; s1's attempt is the one s2 closed as interrupted.
        let recorded = ContinuousClock.now + .seconds(60)
        while !messages.withLock({ $0.contains { $0.contains("not recorded here") } }), ContinuousClock.now < recorded {
            try await Task.sleep(for: .milliseconds(5))
        }
        var attempts = try await log.attempts(batch: "line")
        #expect(attempts.map(\.result) == [.interrupted, .running] && attempts.map(\.station) == ["s1", "s2"])
        #expect(try await log.devices(batch: "line").map(\.station) == ["s2"])
        #expect(messages.withLock { $0 }.contains { $0.contains("stopping its update here") }, "\(messages.withLock { $0 })")
        #expect(messages.withLock { $0 }.contains { $0.contains("not recorded here") }, "\(messages.withLock { $0 })")
        // s2 finishes the device; s1 sees nothing left and ends.
        try await log.endAttempt(
            taker.id, batch: "line", address: address, outcome: AttemptOutcome(result: .done, exitCode: 0, versionAfter: 2), final: .done,
            station: "s2", at: t0 + 70)
        let summary = Mutex<BatchSummary?>(nil)
        let waiter = Task {
            let value = try? await run.value
            summary.withLock { $0 = value }
        }
        // Its look for claimable devices (every second on the clock) finds none left. Polled, never timed: the clock
        // moves only while the loop waits on it (heartbeat, watchdog, look).
        let deadline = ContinuousClock.now + .seconds(60)
        while summary.withLock({ $0 == nil }), ContinuousClock.now < deadline {
            if clock.sleeperCount >= 3 { clock.advance(by: .seconds(1)) }
            try await Task.sleep(for: .milliseconds(5))
        }
        _ = await waiter.value
        #expect(summary.withLock { $0?.done } == 1)
        attempts = try await log.attempts(batch: "line")
        #expect(attempts.map(\.result) == [.interrupted, .done] && attempts.map(\.station) == ["s1", "s2"])
    }
}
