import BLECore
import Foundation
import Synchronization
import Testing

@testable import Batch

@Suite(.timeLimit(.minutes(5))) struct SchedulerTests {
    /// 12 devices on two adapters with two links each: never more than two per adapter or four in all, and the
    /// bound is reached (the fake holds every flash until four run at once).
    @Test(.timeLimit(.minutes(3))) func concurrencyStaysWithinTheAdapterSlots() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flasher = FakeFlasher(hold: 4, total: 12)
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2), ("hci1", 2)]), flasher: flasher, log: log)
        let summary = try await scheduler.run(targets: Fixture.targets(12))
        #expect(summary.done == 12)
        #expect(summary.failed == 0 && summary.pending == 0)
        let counters = flasher.counters.withLock { $0 }
        #expect(counters.maxActiveTotal == 4)
        #expect(counters.maxActive["hci0"] == 2)
        #expect(counters.maxActive["hci1"] == 2)
        #expect(counters.flashes.values.allSatisfy { $0 == 1 })
    }

    /// One device fails every attempt: it alone is failed after 1 + retries attempts; every other device is done
    /// after exactly one attempt.
    @Test func oneFailingDeviceDoesNotStopTheOthers() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let bad = Fixture.address(3).description
        let flasher = FakeFlasher(scripts: [bad: FakeFlasher.Script(results: [false])])
        let events = Mutex<[BatchEvent]>([])
        var scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 3)], retries: 2), flasher: flasher, log: log)
        scheduler.events = { event in events.withLock { $0.append(event) } }
        let summary = try await scheduler.run(targets: Fixture.targets(8))
        #expect(summary.done == 7)
        #expect(summary.failed == 1)
        #expect(summary.statuses[bad] == .failed)
        let counters = flasher.counters.withLock { $0 }
        #expect(counters.flashes[bad] == 3)
        #expect(counters.flashes.filter { $0.key != bad }.values.allSatisfy { $0 == 1 })
        let record = try #require(try await log.devices().first { $0.address == bad })
        #expect(record.status == .failed)
        #expect(record.attempts == 3)
        #expect(record.error?.contains("wrong hardware version") == true)
        #expect(record.exitCode == 40)
        // Two "will retry" events, then the final failure.
        let retries = events.withLock { $0 }.filter { if case .finished(bad, .pending, _, true) = $0 { true } else { false } }
        #expect(retries.count == 2)
    }

    /// Every device fails: after three failed devices no new device starts; the rest stay pending.
    @Test func theLineStopsAfterNFailures() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flasher = FakeFlasher(defaultScript: FakeFlasher.Script(results: [false]))
        let events = Mutex<[BatchEvent]>([])
        var scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 1)], retries: 0, stopAfter: 3), flasher: flasher, log: log)
        scheduler.events = { event in events.withLock { $0.append(event) } }
        let summary = try await scheduler.run(targets: Fixture.targets(10))
        #expect(summary.lineStopped)
        #expect(summary.failed == 3)
        #expect(summary.pending == 7)
        #expect(flasher.counters.withLock { $0.flashes.values.reduce(0, +) } == 3)
        #expect(events.withLock { $0 }.contains(.lineStopped(failures: 3)))
        let records = try await log.devices()
        #expect(records.filter { $0.status == .pending }.count == 7)
        #expect(records.filter { $0.status == .failed }.count == 3)
    }

    /// A device already running the target version is skipped without a flash; --force flashes it anyway.
    @Test func devicesAtTheTargetVersionAreSkipped() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let current = Fixture.address(2).description
        let flasher = FakeFlasher(scripts: [current: FakeFlasher.Script(installed: 2)])
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)]), flasher: flasher, log: log)
        let summary = try await scheduler.run(targets: Fixture.targets(4))
        #expect(summary.done == 3)
        #expect(summary.skipped == 1)
        #expect(flasher.counters.withLock { $0.flashes[current] } == nil)
        let record = try #require(try await log.devices().first { $0.address == current })
        #expect(record.status == .skipped)
        #expect(record.versionBefore == 2)
        #expect(record.versionAfter == 2)

        let (forcedLog, forcedLogURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(forcedLogURL) }
        let forcedFlasher = FakeFlasher(scripts: [current: FakeFlasher.Script(installed: 2)])
        var forced = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)]), flasher: forcedFlasher, log: forcedLog)
        forced.force = true
        let forcedSummary = try await forced.run(targets: Fixture.targets(4))
        #expect(forcedSummary.done == 4)
        #expect(forcedFlasher.counters.withLock { $0.flashes[current] } == 1)
    }

    /// The skip policy off: a device at the target version is flashed.
    @Test func skipPolicyOffFlashesEveryDevice() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flasher = FakeFlasher(defaultScript: FakeFlasher.Script(installed: 5))
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)], skip: false), flasher: flasher, log: log)
        let summary = try await scheduler.run(targets: Fixture.targets(3))
        #expect(summary.done == 3)
        #expect(flasher.counters.withLock { $0.flashes.count } == 3)
    }

    /// A device that fails once and then succeeds is done, with two attempts in the log; a permanent failure is
    /// not retried.
    @Test func retriesUntilSuccessAndNotForPermanentFailures() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flaky = Fixture.address(1).description
        let broken = Fixture.address(2).description
        let flasher = FakeFlasher(scripts: [
            flaky: FakeFlasher.Script(results: [false, true]),
            broken: FakeFlasher.Script(results: [false], retryable: false),
        ])
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)], retries: 3), flasher: flasher, log: log)
        let summary = try await scheduler.run(targets: Fixture.targets(2))
        #expect(summary.statuses[flaky] == .done)
        #expect(summary.statuses[broken] == .failed)
        let attempts = try await log.attempts()
        #expect(attempts.filter { $0.address == flaky }.map(\.result) == [.failed, .done])
        #expect(attempts.filter { $0.address == flaky }.map(\.number) == [1, 2])
        #expect(attempts.filter { $0.address == broken }.map(\.result) == [.failed])
    }

    /// Every device gets its own bootloader name, also when two addresses share their last three bytes.
    @Test func bootloaderNamesAreUniqueInTheLine() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flasher = FakeFlasher()
        var targets = Fixture.targets(5)
        let twin = try #require(BluetoothAddress("D6:05:04:03:00:01"))
        targets.append(BatchTarget(peer: PeerAddress(twin, type: .random), className: "bracelet"))
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 3)]), flasher: flasher, log: log)
        _ = try await scheduler.run(targets: targets)
        let names = flasher.counters.withLock { $0.bootloaderNames }
        #expect(names.count == 6)
        #expect(Set(names.values).count == 6)
        #expect(names[Fixture.address(1).description] == "Dfu030001")
        #expect(names[twin.description] == "Dfu04030001")
        #expect(names.values.allSatisfy { $0.utf8.count <= 20 })
    }

    /// A retry waits at the back of the queue: a failing device delays no device behind it.
    @Test func aRetryGoesToTheBackOfTheQueue() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flaky = Fixture.address(1).description
        let flasher = FakeFlasher(scripts: [flaky: FakeFlasher.Script(results: [false, true])])
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 1)], retries: 1), flasher: flasher, log: log)
        let summary = try await scheduler.run(targets: Fixture.targets(4))
        #expect(summary.done == 4)
        #expect(flasher.counters.withLock { $0.order } == [1, 2, 3, 4, 1].map { Fixture.address($0).description })
    }

    /// A device that comes back in its bootloader after a "successful" flash failed: its application does not start.
    @Test func aDeviceStuckInItsBootloaderFails() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let stuck = Fixture.address(2).description
        let flasher = FakeFlasher(scripts: [stuck: FakeFlasher.Script(staysInBootloader: true)])
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)], retries: 0), flasher: flasher, log: log)
        let summary = try await scheduler.run(targets: Fixture.targets(3))
        #expect(summary.statuses[stuck] == .failed)
        #expect(summary.done == 2)
        let record = try #require(try await log.devices().first { $0.address == stuck })
        #expect(record.error?.contains("stays in its bootloader") == true)
    }
}
