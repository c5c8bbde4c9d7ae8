import BLECore
import Foundation
import Synchronization
import TestDoubles
import Testing

@testable import Batch

/// "Adapter has no free link" (exit 21) and "adapter busy" (22) are back-pressure, not the device's failure
/// (docs/batch.md "Links per adapter"): the device keeps its place and its retries and is tried again when a link
/// frees; the scheduler runs no more links on the adapter than its controller carried when it refused.
@Suite(.timeLimit(.minutes(3))) struct BackPressureTests {
    /// A central adapter whose controller carries `limit` links: a flash beyond them is refused as `bledfu flash`
    /// does (exit 21, "no free link"). The first `limit` flashes hold their links until a refusal was seen, so the
    /// refusal always happens (no timing).
    final class ControllerFlasher: DeviceFlasher {
        struct State {
            var inUse = 0
            var maxInUse = 0
            var refusals = 0
            var held: [CheckedContinuation<Void, Never>] = []
            var flashes: [String: Int] = [:]
        }
        let limit: Int
        let state = Mutex(State())
        init(limit: Int) { self.limit = limit }

        func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async
            -> DeviceProbe
        {
            let flashed = state.withLock { $0.flashes[target.address.description, default: 0] > 0 }
            return DeviceProbe(mode: .application, applicationVersion: afterUpdate && flashed ? 2 : 1)
        }

        func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
            enum Taken { case refused([CheckedContinuation<Void, Never>]), link(hold: Bool) }
            let taken = state.withLock { state -> Taken in
                guard state.inUse < limit else {
                    state.refusals += 1
                    defer { state.held = [] }
                    return .refused(state.held)
                }
                state.inUse += 1
                state.maxInUse = max(state.maxInUse, state.inUse)
                state.flashes[job.target.address.description, default: 0] += 1
                return .link(hold: state.refusals == 0)
            }
            switch taken {
            case .refused(let waiters):
                for waiter in waiters { waiter.resume() }
                var outcome = FlashOutcome(
                    success: false, error: "adapter hci0 has \(limit) links and no free link (HCI 0x09) [exit 21]",
                    exitCode: 21, retryable: true)
                outcome.backPressure = .noFreeLink
                return outcome
            case .link(let hold):
                if hold {
                    await withCheckedContinuation { continuation in
                        let release = state.withLock { state -> Bool in
                            if state.refusals > 0 { return true }
                            state.held.append(continuation)
                            return false
                        }
                        if release { continuation.resume() }
                    }
                }
                state.withLock { $0.inUse -= 1 }
                return FlashOutcome(success: true, exitCode: 0, bytes: job.package.totalBytes)
            }
        }
    }

    /// Six devices, a plan of four links on an adapter whose controller carries two, and no retries: every refusal
    /// would fail its device for good if it counted (before back-pressure: two devices failed). All six are done and
    /// each device was flashed exactly once (a refused attempt never reached it).
    @Test func noFreeLinkIsRetriedWhenALinkFrees() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flasher = ControllerFlasher(limit: 2)
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci0", 4)], retries: 0), packages: ["bracelet": Fixture.package],
            flasher: flasher, log: log, batch: "line.yaml")
        scheduler.now = Fixture.steppingClock()
        let summary = try await scheduler.run(targets: Fixture.targets(6))
        #expect(summary.done == 6, "\(summary.statuses)")
        #expect(summary.failed == 0)
        let state = flasher.state.withLock { $0 }
        #expect(state.refusals >= 1)
        #expect(state.flashes.values.allSatisfy { $0 == 1 }, "\(state.flashes)")
        // The refused attempts are recorded as such, and the devices' tries are not spent on them.
        let devices = try await log.devices(batch: "line.yaml")
        #expect(devices.allSatisfy { $0.status == .done && $0.tries <= 1 })
    }

    /// An adapter busy creating another program's connection (exit 22) while none of this line's links run on it:
    /// the adapter rests `backPressureInterval` on the scheduler's clock (a manual one here) and the device is tried
    /// again, with no retries left in the plan and no wall-clock wait.
    @Test func adapterBusyRestsOnTheClockAndTriesAgain() async throws {
        let busyFlasher = BusyFlasher(busyTimes: 2)
        let (summary, _) = try await Self.runResting(busyFlasher, refusals: 2) { busyFlasher.calls.withLock { $0 } }
        #expect(summary.done == 1)
        #expect(busyFlasher.calls.withLock { $0 } == 3)
    }

    /// The probe after an update that gets no link (the adapter's other links are busy) is no answer about the
    /// device: it is tried again after the adapter's rest on the scheduler's clock, and the record gets the version
    /// the device runs (before: "done" with no version after).
    @Test func aProbeAfterTheUpdateWithoutALinkIsTriedAgain() async throws {
        let flasher = BusyFlasher(busyTimes: 0, refusedAfterProbes: 2)
        let (summary, devices) = try await Self.runResting(flasher, refusals: 2) { flasher.afterProbes.withLock { $0 } }
        #expect(summary.done == 1)
        #expect(flasher.afterProbes.withLock { $0 } == 3)
        #expect(devices.count == 1 && devices.allSatisfy { $0.status == .done && $0.versionAfter == 2 }, "\(devices)")
    }

    /// One device on an adapter of one link, on a manual clock with a 2 s rest after back-pressure: for each of the
    /// `refusals`, waits until the heartbeat (10 s), the watchdog (7.5 s) and the rest sleep on the clock, checks that
    /// `count` (the refused calls so far) is that refusal's number, and wakes the rest only. Returns the run's
    /// summary and the device records.
    static func runResting(_ flasher: some DeviceFlasher, refusals: Int, count: @escaping @Sendable () -> Int)
        async throws -> (BatchSummary, [DeviceRecord])
    {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let clock = ManualClock()
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci0", 1)], retries: 0), packages: ["bracelet": Fixture.package],
            flasher: flasher, log: log, batch: "line.yaml")
        scheduler.now = Fixture.steppingClock()
        scheduler.clock = clock
        scheduler.backPressureInterval = .seconds(2)
        let run = Task { [scheduler] in try await scheduler.run(targets: Fixture.targets(1)) }
        for refusal in 1...refusals {
            await clock.waitForSleepers(3)
            #expect(count() == refusal)
            clock.advance(by: .seconds(2))
        }
        let summary = try await run.value
        return (summary, try await log.devices(batch: "line.yaml"))
    }

    /// An adapter that never frees a link does not keep the line forever: after `backPressureLimit` refusals in a
    /// row the attempt counts as an ordinary failure (here: no retries, so the device fails).
    @Test func anAdapterThatNeverFreesALinkEndsTheDevice() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let clock = ManualClock()
        let busyFlasher = BusyFlasher(busyTimes: .max)
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci0", 1)], retries: 0), packages: ["bracelet": Fixture.package],
            flasher: busyFlasher, log: log, batch: "line.yaml")
        scheduler.now = Fixture.steppingClock()
        scheduler.clock = clock
        scheduler.backPressureInterval = .seconds(2)
        scheduler.backPressureLimit = 3
        let run = Task { try await scheduler.run(targets: Fixture.targets(1)) }
        for _ in 1...3 {
            await clock.waitForSleepers(3)
            clock.advance(by: .seconds(2))
        }
        let summary = try await run.value
        #expect(summary.failed == 1)
        #expect(busyFlasher.calls.withLock { $0 } == 4)
    }

    /// The probe before the flash gets no link (the adapter's controller is full with another program's links): the
    /// attempt ends as back-pressure before any flash, with the probe's exit code, and the device is flashed after the
    /// adapter's rest, with no retries in the plan.
    @Test func aProbeWithoutALinkIsBackPressureToo() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let clock = ManualClock()
        let busyFlasher = BusyFlasher(busyTimes: 0, refusedProbes: 1)
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci0", 1)], retries: 0), packages: ["bracelet": Fixture.package],
            flasher: busyFlasher, log: log, batch: "line.yaml")
        scheduler.now = Fixture.steppingClock()
        scheduler.clock = clock
        scheduler.backPressureInterval = .seconds(2)
        let run = Task { try await scheduler.run(targets: Fixture.targets(1)) }
        await clock.waitForSleepers(3)
        #expect(busyFlasher.calls.withLock { $0 } == 0, "no flash after a refused probe")
        clock.advance(by: .seconds(2))
        let summary = try await run.value
        #expect(summary.done == 1)
        #expect(busyFlasher.calls.withLock { $0 } == 1)
        let attempts = try await log.attempts(batch: "line.yaml")
        #expect(attempts.map(\.exitCode) == [21, 0])
    }

    /// Refuses the first `busyTimes` flashes as "adapter busy" (exit 22), then flashes; the first `refusedProbes`
    /// probes, and the first `refusedAfterProbes` probes after an update, get no link ("no free link", exit 21).
    final class BusyFlasher: DeviceFlasher {
        let busyTimes: Int
        let calls = Mutex(0)
        let probes = Mutex(0)
        let afterProbes = Mutex(0)
        let refusedProbes: Int
        let refusedAfterProbes: Int
        init(busyTimes: Int, refusedProbes: Int = 0, refusedAfterProbes: Int = 0) {
            self.busyTimes = busyTimes
            self.refusedProbes = refusedProbes
            self.refusedAfterProbes = refusedAfterProbes
        }

        func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async
            -> DeviceProbe
        {
            let probe = probes.withLock { value in
                value += 1
                return value
            }
            let after = afterProbes.withLock { value in
                if afterUpdate { value += 1 }
                return value
            }
            guard probe > refusedProbes, !afterUpdate || after > refusedAfterProbes else {
                var refused = DeviceProbe(
                    mode: .unreachable, error: "adapter hci0 has 5 links and no free link", backPressure: .noFreeLink)
                refused.exitCode = 21
                return refused
            }
            return DeviceProbe(mode: .application, applicationVersion: afterUpdate ? 2 : 1)
        }

        func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
            let call = calls.withLock { value in
                value += 1
                return value
            }
            guard call > busyTimes else {
                var outcome = FlashOutcome(
                    success: false, error: "adapter hci0 is busy creating another connection [exit 22]", exitCode: 22)
                outcome.backPressure = .adapterBusy
                return outcome
            }
            return FlashOutcome(success: true, exitCode: 0, bytes: job.package.totalBytes)
        }
    }
}
