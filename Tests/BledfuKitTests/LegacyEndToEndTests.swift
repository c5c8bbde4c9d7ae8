import BLECore
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUSimulator
import Foundation
import LegacyDFU
import Testing

@testable import BledfuKit

/// Whole Legacy updates through the shipped ``Updater`` over real SEQPACKET socket pairs (``VirtualDeviceAdapter``):
/// images of one kind each, restarts from zero after seeded link losses, a power loss and the device restored from
/// its persistent state, the repository's Legacy samples on their profiles.
@Suite(.timeLimit(.minutes(10))) struct LegacyEndToEndTests {
    static let image = SyntheticPackage.image(6000, seed: 9)

    /// Runs `request` on `device` with the updater's default families; the events and the result.
    static func update(_ device: VirtualLegacyDevice, _ request: UpdateRequest) async -> ([UpdateEvent], Result<UpdateResult, DFUError>) {
        let run = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock()).start(request)
        var events: [UpdateEvent] = []
        for await event in run { events.append(event) }
        do {
            return (events, .success(try await run.result()))
        } catch {
            return (events, .failure(error))
        }
    }

    /// The buttonless jumps of an update: each starts from the application (the updater's `applicationMode`).
    static func jumps(_ events: [UpdateEvent]) -> Int {
        events.filter { if case .applicationMode = $0 { true } else { false } }.count
    }

    /// A bootloader-only and a SoftDevice-only package, each activated on its own (legacy-dfu.md §7.2): the new
    /// bootloader keeps the application (the device starts it); the SoftDevice invalidates bank 0 at Start, so the
    /// device stays in its bootloader without an application, to take one in a second update.
    @Test func bootloaderOnlyThenSoftDeviceOnly() async throws {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        let bootloader = SyntheticPackage.image(8192, seed: 21)
        var builder = PackageBuilder()
        builder.bootloader = PackageBuilder.Image(stem: "bootloader", bytes: bootloader)
        builder.legacy = LegacyOptions()
        let (_, first) = await Self.update(
            device, LegacyKitFixture.request(SyntheticPackage.source(try builder.archive(), fileName: "bl.zip")))
        _ = try first.get()
        let afterBootloader = await device.state()
        #expect(afterBootloader.installed.bootloader.sha256 == DFUSimulatorDigest.sha256Hex(bootloader))
        #expect(afterBootloader.mode == .application && afterBootloader.installed.application != nil)

        let softdevice = SyntheticPackage.image(24_576, seed: 22)
        builder = PackageBuilder()
        builder.softdevice = PackageBuilder.Image(stem: "softdevice", bytes: softdevice)
        builder.legacy = LegacyOptions()
        let (_, second) = await Self.update(
            device, LegacyKitFixture.request(SyntheticPackage.source(try builder.archive(), fileName: "sd.zip")))
        _ = try second.get()
        let afterSoftDevice = await device.state()
        #expect(afterSoftDevice.installed.softdevice?.sha256 == DFUSimulatorDigest.sha256Hex(softdevice))
        #expect(afterSoftDevice.installed.bootloader.sha256 == DFUSimulatorDigest.sha256Hex(bootloader))
        #expect(afterSoftDevice.mode == .bootloader && afterSoftDevice.installed.application == nil)
    }

    /// A lost link at seeded byte counts: the device keeps its transfer state, answers the next Start with
    /// "invalid state", is reset and comes back (dual bank: as its old application, so a jump again), and the image
    /// is sent again from zero; every run ends with the image checked on the device.
    @Test(arguments: [(7 as UInt64, 1 as UInt64), (7, 2_020), (11, 3_333), (13, 5_980)])
    func disconnectsAtSeededOffsets(seed: UInt64, afterBytes: UInt64) async throws {
        let faults = try FaultPlan(parsing: "seed=\(seed),disconnect-after-bytes=\(afterBytes)")
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), faults: faults, clock: ContinuousClock())
        let (events, outcome) = await Self.update(
            device, LegacyKitFixture.request(try LegacyKitFixture.package(image: Self.image)))
        let result = try outcome.get()
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(Self.image))
        #expect(result.statistics.bytesResent >= Int(afterBytes))
        let summary = try #require(result.summary)
        #expect(summary.contains("link lost ×1") && summary.contains("device busy with an earlier transfer ×1"), "\(summary)")
        #expect(Self.jumps(events) == 2)
        #expect(state.faults.count == 1)
    }

    /// InfiniTime: the DFU service is in the application, so no jump; the image is installed after Activate.
    @Test func pineTimeNeedsNoJump() async throws {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(LegacyDeviceProfile.pineTime), clock: ContinuousClock())
        let (events, outcome) = await Self.update(
            device, LegacyKitFixture.request(try LegacyKitFixture.package(image: Self.image), family: .legacy))
        _ = try outcome.get()
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(Self.image))
        #expect(Self.jumps(events) == 0)
        #expect(events.contains(.detected(family: .legacy, mode: .updater, address: LegacyKitFixture.address.description)))
    }

    /// Power loss in the middle of an image on a single-bank device, an updater that does not reconnect: the
    /// persistent state (as JSON) says bootloader, no application; a device restored from it advertises its
    /// bootloader at address + 1, and a second update finishes it.
    @Test func powerLossOnSingleBankThenRestore() async throws {
        let faults = try FaultPlan(parsing: "power-loss-after-bytes=2000")
        let profile = LegacyKitFixture.profile(LegacyDeviceProfile.adafruitNRF52832)
        let sink = SnapshotSink()
        let device = VirtualLegacyDevice(
            profile: profile, faults: faults, clock: ContinuousClock(), statusSink: { await sink.add($0) })
        let package = try LegacyKitFixture.package(deviceType: 0x0052, image: Self.image)
        var once = LegacyKitFixture.request(package)
        once.reconnect = ReconnectPolicy(attempts: 0)
        let (_, first) = await Self.update(device, once)
        #expect(throws: DFUError.self) { try first.get() }
        let saved = try JSONEncoder().encode(await device.persistentState())
        let restoredState = try JSONDecoder().decode(LegacyPersistentState.self, from: saved)
        #expect(restoredState.mode == .bootloader && restoredState.installed.application == nil)
        #expect(restoredState.family == "legacy")
        let restored = VirtualLegacyDevice(profile: profile, clock: ContinuousClock(), restoring: restoredState)
        #expect(await restored.currentAdvertisement.peer.address == LegacyKitFixture.address.nordicBootloaderAddress)
        let (_, second) = await Self.update(restored, LegacyKitFixture.request(package))
        _ = try second.get()
        #expect(await restored.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(Self.image))
        // The status snapshots went out as JSON with the transfer in them.
        let snapshots = await sink.states
        #expect(snapshots.contains { $0.transfer.state == "rx_data_pkt" })
        let json = String(decoding: try JSONEncoder().encode(try #require(snapshots.first)), as: UTF8.self)
        #expect(json.contains("\"family\":\"legacy\"") && json.contains("\"bank_0\""))
    }

    /// The Legacy samples in Firmware/samples, as zip files through the updater onto their Firmware/*.json profiles
    /// (application first, the jump, every part), each image byte for byte on the device.
    @Test(arguments: [
        ("sdk11-nrf51-app-v2.zip", "sdk11-nrf51"), ("sdk11-nrf52-sd-bl-app.zip", "sdk11-nrf52"),
        ("adafruit-feather52832-app-v2.zip", "adafruit-feather52832"), ("pinetime-app-v2.zip", "pinetime"),
    ])
    func sampleOnItsProfile(sample: String, profileName: String) async throws {
        let firmware = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Firmware")
        let bytes = Array(try Data(contentsOf: firmware.appendingPathComponent("samples/\(sample)")))
        let parts = try LegacyPart.parts(of: try FirmwarePackage(bytes: bytes))
        var profile = try JSONDecoder().decode(
            LegacyDeviceProfile.self, from: try Data(contentsOf: firmware.appendingPathComponent("\(profileName).json")))
        profile.speedup = .infinity
        let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        let request = UpdateRequest(
            package: SyntheticPackage.source(bytes, fileName: sample),
            target: .address(PeerAddress(profile.address, type: profile.addressType)),
            options: UpdateOptions(pacing: "adaptive", rebootDelay: .zero), reconnect: ReconnectPolicy(initialDelay: .zero))
        let (events, outcome) = await Self.update(device, request)
        #expect(try outcome.get().family == .legacy)
        let state = await device.state()
        for part in parts { #expect(LegacyCorpus.holds(state, part), "\(sample) \(part.name)") }
        #expect(state.mode == .application)
        #expect(events.filter { if case .partCompleted = $0 { true } else { false } }.count == parts.count)
        if parts.count == 2 { #expect(state.softdeviceFWID == 0x81) }  // read from the new SoftDevice's info structure
    }
}

actor SnapshotSink {
    var states: [LegacyDeviceState] = []
    func add(_ state: LegacyDeviceState) { states.append(state) }
}
