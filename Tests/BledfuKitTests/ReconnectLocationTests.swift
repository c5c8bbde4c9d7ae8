import BLECore
import BledfuTestSupport
import DFUCore
import DFUSimulator
import GATT
import TestDoubles
import Testing

@testable import BledfuKit

/// Issue 18 point 1, the power-loss case, in-process on a manual clock: a dual-bank nRF5 device that loses power in
/// the middle of an update boots its old application at its original address (`nrf_bootloader.c dfu_enter_check`:
/// the application is valid and GPREGRET clear; docs/simulator.md). The reconnect after the lost link looks for
/// the device at the bootloader's address *and* at the application's (`PartLoop`), finds the application, jumps
/// again and resumes. Before, it looked only at the bootloader's address, spent its attempts and failed (exit 43).
@Suite(.timeLimit(.minutes(5))) struct ReconnectLocationTests {
    @Test func aDeviceThatLostPowerIsFoundInItsApplicationAndFinished() async throws {
        let (device, events, outcome) = await Self.update(faults: "power-loss-after-bytes=6000")
        let result = try outcome.get()
        #expect(result.statistics.reconnects == 1)
        let state = await device.state()
        #expect(state.faults.map(\.kind) == ["power-loss"])
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(KitFixture.image))
        let application = KitFixture.address.description
        // Two jumps from the application at its own address: the first connection's and the reconnect's.
        #expect(events.filter { $0 == .jumping(address: application, bonded: false) }.count == 2)
        #expect(events.contains(.reconnecting(attempt: 1, of: 5, delayMilliseconds: 500)))
        #expect(!events.contains { if case .reconnecting(attempt: 2, _, _) = $0 { true } else { false } })
        #expect(events.last == .completed(address: application))
        // Executed objects survive the power loss only on progress-saving devices; this one saves none (the SDK
        // default): the bytes confirmed in the end are the image's.
        let progress = events.compactMap { if case .progress(let p) = $0 { p } else { nil } }
        #expect(progress.last?.bytes == KitFixture.image.count)
    }

    /// `--unique-name` (the bootloader name asked for through buttonless) and a lost link: the reconnect looks for
    /// the bootloader by that name again, not only at the address the link had. Before, the part loop kept only the
    /// link's peer and dropped the names the jump returned: the reconnect found the device by address alone.
    @Test func aLostLinkIsRefoundByTheUniqueBootloaderName() async throws {
        let (device, events, outcome) = await Self.update(faults: "disconnect-after-bytes=6000", bootloaderName: "Dfu3344FF")
        let result = try outcome.get()
        #expect(result.statistics.reconnects == 1)
        #expect(await device.state().faults.map(\.kind) == ["disconnect"])
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(KitFixture.image))
        let bootloader = KitFixture.address.nordicBootloaderAddress.description
        let found = events.compactMap { if case .found(let address, let name, let byName) = $0 { (address, name, byName) } else { nil } }
        // The jump's search and the reconnect's: both by the unique name, at the bootloader's address.
        #expect(found.count == 2, "\(events)")
        #expect(found.allSatisfy { $0.0 == bootloader && $0.1 == "Dfu3344FF" && $0.2 }, "\(found)")
        #expect(events.last == .completed(address: KitFixture.address.description))
    }

    /// Power lost just before the final Execute (the request never arrives): the dual-bank device boots its old
    /// application, version 1. Looking at the device after the unacknowledged last step finds an application, but
    /// its Firmware Revision says 1, not the package's 2: the step did not take effect, so the updater jumps again
    /// and sends the image again. Before, any application counted as the new one: success was reported while the
    /// device still ran version 1 (found by the fault campaign's old-application draw, seed 2, run 3).
    @Test func theOldApplicationAfterAnUnacknowledgedLastStepIsNotTakenForTheNewOne() async throws {
        let (device, events, outcome) = await Self.update(faults: "power-loss-at=before-final-execute")
        let result = try outcome.get()
        let state = await device.state()
        #expect(state.faults.map(\.kind) == ["power-loss"])
        #expect(state.installed.application?.version == 2)
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(KitFixture.image))
        #expect(
            events.contains {
                if case .warning(let text) = $0 { text.contains("application version 1, not 2") } else { false }
            }, "\(events)")
        #expect(!events.contains(.message("application: the device restarted into its application: the last step took effect")))
        #expect(result.statistics.reconnects >= 1)
        #expect(events.last == .completed(address: KitFixture.address.description))
    }

    /// One update of KitFixture's device with `faults`, on a manual clock that jumps each reconnect's delay: the
    /// device, every event and the run's end.
    static func update(
        faults: String, bootloaderName: String? = nil
    ) async -> (VirtualDevice, [UpdateEvent], Result<UpdateResult, DFUError>) {
        let device: VirtualDevice
        let package: PackageSource
        do {
            device = VirtualDevice(profile: KitFixture.profile(), faults: try FaultPlan(parsing: faults), clock: ContinuousClock())
            package = try KitFixture.package()
        } catch {
            Issue.record("fixture: \(error)")
            return (VirtualDevice(profile: KitFixture.profile(), clock: ContinuousClock()), [], .failure(DFUError(.invalidOption, "fixture")))
        }
        let clock = ManualClock()
        let updater = Updater(
            adapter: VirtualDeviceAdapter(devices: [device], link: .inMemory), clock: clock,
            journal: InMemoryUpdateJournalStore())
        var request = KitFixture.request(package)
        if let bootloaderName { request.options.bootloaderName = bootloaderName }
        let run = updater.start(request)
        var events: [UpdateEvent] = []
        for await event in run {
            events.append(event)
            if case .reconnecting(_, _, let delay) = event {
                await clock.waitForSleepers(1)
                clock.advance(by: .milliseconds(delay))
            }
        }
        do throws(DFUError) {
            return (device, events, .success(try await run.result()))
        } catch {
            return (device, events, .failure(error))
        }
    }
}
