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
        let device = VirtualDevice(
            profile: KitFixture.profile(), faults: try FaultPlan(parsing: "power-loss-after-bytes=6000"),
            clock: ContinuousClock())
        let adapter = VirtualDeviceAdapter(devices: [device], link: .inMemory)
        let clock = ManualClock()
        let updater = Updater(adapter: adapter, clock: clock, journal: InMemoryUpdateJournalStore())
        let package = try KitFixture.package()
        let run = updater.start(KitFixture.request(package))
        var events: [UpdateEvent] = []
        for await event in run {
            events.append(event)
            if case .reconnecting(_, _, let delay) = event {
                await clock.waitForSleepers(1)
                clock.advance(by: .milliseconds(delay))
            }
        }
        let result = try await run.result()
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
}
