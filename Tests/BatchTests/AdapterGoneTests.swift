import BLECore
import Foundation
import Synchronization
import Testing

@testable import Batch

/// An adapter that disappears mid-batch (a USB adapter pulled: ENODEV, `/sys/class/bluetooth/hciN` gone; a virtual
/// radio's directory removed) is its own outcome (issue 21, bad input): the device whose attempt it cut keeps its
/// place, no device starts on that adapter again, the other adapters go on; with none left the line stops.
@Suite(.timeLimit(.minutes(3))) struct AdapterGoneTests {
    /// Every flash on a pulled adapter fails as `bledfu flash` does there (exit 11, no adapter), and the adapter is
    /// reported gone once pulled.
    final class PullingFlasher: DeviceFlasher {
        let pulled: Set<String>
        let flashes = Mutex<[String: [String]]>([:])
        init(pulled: Set<String>) { self.pulled = pulled }

        func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async
            -> DeviceProbe
        {
            DeviceProbe(mode: .application, applicationVersion: afterUpdate ? 2 : 1)
        }

        func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
            flashes.withLock { $0[job.adapter.label, default: []].append(job.target.address.description) }
            if pulled.contains(job.adapter.label) {
                return FlashOutcome(success: false, error: "no Bluetooth adapter hci1 (No such device) [exit 11]", exitCode: 11)
            }
            return FlashOutcome(success: true, exitCode: 0, bytes: job.package.totalBytes)
        }

        func adapterPresent(_ adapter: BatchPlan.Adapter) async -> Bool { !pulled.contains(adapter.label) }
    }

    @Test func theOtherAdaptersFinishTheDevicesOfAPulledOne() async throws {
        let (log, url) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(url) }
        let flasher = PullingFlasher(pulled: ["hci1"])
        // No retries: a device cut by the pulled adapter must not be failed for it.
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci0", 1), ("hci1", 1)], retries: 0), packages: ["bracelet": Fixture.package],
            flasher: flasher, log: log, batch: "line.yaml")
        scheduler.now = Fixture.steppingClock()
        let messages = Mutex<[String]>([])
        scheduler.events = { event in if case .message(let text) = event { messages.withLock { $0.append(text) } } }
        let summary = try await scheduler.run(targets: Fixture.targets(4))
        #expect(summary.done == 4)
        #expect(summary.failed == 0)
        #expect(summary.adaptersGone == ["hci1"])
        #expect(flasher.flashes.withLock { $0["hci1"]?.count } == 1, "no device starts on a gone adapter again")
        #expect(messages.withLock { $0 }.contains("adapter hci1 is gone (unplugged or removed): no device starts on it again in this run"))
        let attempts = try await log.attempts(batch: "line.yaml")
        let cut = try #require(attempts.first { $0.adapter == "hci1" })
        #expect(cut.error?.hasPrefix("adapter hci1 is gone (unplugged or removed) during the update") == true, "\(cut)")
        #expect(cut.exitCode == 11)
    }

    @Test func withNoAdapterLeftTheLineStopsAndTheRestStaysPending() async throws {
        let (log, url) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(url) }
        var scheduler = BatchScheduler(
            plan: Fixture.plan(adapters: [("hci1", 2)], retries: 3), packages: ["bracelet": Fixture.package],
            flasher: PullingFlasher(pulled: ["hci1"]), log: log, batch: "line.yaml")
        scheduler.now = Fixture.steppingClock()
        let summary = try await scheduler.run(targets: Fixture.targets(5))
        #expect(summary.adaptersGone == ["hci1"])
        #expect(summary.failed == 0)
        #expect(summary.done == 0)
        #expect(summary.pending == 5)
    }
}
