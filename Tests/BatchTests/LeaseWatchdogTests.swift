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
}
