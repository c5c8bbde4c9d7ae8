import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import GATT
import LegacyDFU
import Testing

/// Whole updates of virtual Legacy devices over real SEQPACKET socket pairs: detection, the buttonless jump and where
/// the bootloader advertises, the parts, restarts from zero after seeded link losses.
@Suite(.timeLimit(.minutes(10))) struct EndToEndTests {
    static let image = LegacyFixture.firmware(6000, seed: 9)

    @Test func sdk11ApplicationWithTheButtonlessJump() async throws {
        let device = VirtualLegacyDevice(
            profile: LegacyFixture.instant(.sdk11NRF51(address: LegacyFixture.address)), clock: ContinuousClock())
        var harness = LegacyHarness(device: device)
        try await harness.update([LegacyFixture.application(Self.image)])
        let state = await device.state()
        #expect(LegacyEndToEnd.holds(state, LegacyFixture.application(Self.image)))
        #expect(state.mode == .application)
        #expect(harness.jumps == 1)
        #expect(harness.misplaced.isEmpty, "\(harness.misplaced)")
        #expect(harness.modes.first == .application(version: .application))
        #expect(harness.modes.dropFirst().first == .bootloader(version: .sdk11))
    }

    /// SDK 11 keeps the address and advertises directed after the jump (peer data); Adafruit keeps it undirected;
    /// without peer data the bootloader is at address + 1 with its name.
    @Test func whereTheBootloaderAdvertises() async throws {
        let sdk11 = VirtualLegacyDevice(profile: LegacyFixture.instant(.sdk11NRF52(address: LegacyFixture.address)), clock: ContinuousClock())
        var harness = LegacyHarness(device: sdk11)
        let (gatt, serving) = try await harness.connect()
        let transport = try await GATTLegacyTransport.open(client: gatt)
        _ = try await LegacyButtonless.enterBootloader(over: transport, address: LegacyFixture.address, version: transport.version)
        await serving.value
        let directed = await sdk11.currentAdvertisement
        #expect(directed.peer.address == LegacyFixture.address && directed.data.isEmpty)
        #expect(await sdk11.state().directedAdvertising)
        harness.connections = 0

        var profile = LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address))
        let adafruit = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        let (gatt2, serving2) = try await LegacyHarness(device: adafruit).connect()
        let transport2 = try await GATTLegacyTransport.open(client: gatt2)
        _ = try await LegacyButtonless.enterBootloader(over: transport2, address: LegacyFixture.address, version: transport2.version)
        await serving2.value
        let undirected = await adafruit.currentAdvertisement
        #expect(undirected.peer.address == LegacyFixture.address)
        #expect(undirected.parsed.name == "AdaDFU")
        #expect(undirected.parsed.serviceUUIDs.contains(LegacyDFUUUID.service))

        profile.peerDataHandover = false
        let plain = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        let (gatt3, serving3) = try await LegacyHarness(device: plain).connect()
        let transport3 = try await GATTLegacyTransport.open(client: gatt3)
        _ = try await LegacyButtonless.enterBootloader(over: transport3, address: LegacyFixture.address, version: transport3.version)
        await serving3.value
        let plusOne = await plain.currentAdvertisement
        #expect(plusOne.peer.address == LegacyFixture.address.nordicBootloaderAddress)
        #expect(plusOne.parsed.name == "AdaDFU")
    }

    /// A bootloader-only and a SoftDevice-only part, each activated on its own (legacy-dfu.md §7.2): the new
    /// bootloader keeps the application (the device starts it); the SoftDevice invalidates bank 0 at Start, so the
    /// device stays in its bootloader without an application, to take one in a second session.
    @Test func bootloaderOnlyThenSoftDeviceOnly() async throws {
        func part(_ name: String, _ type: LegacyImageType, _ sizes: LegacyStartSizes, _ image: [UInt8]) -> LegacyPart {
            let packet = LegacyInitPacket(
                layout: .v05, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 0xFFFF_FFFF,
                softdeviceReq: [0xFFFE], image: image)
            return LegacyPart(name: name, imageType: type, sizes: sizes, initPacket: packet.encode(), image: image, initLayout: .v05)
        }
        let device = VirtualLegacyDevice(
            profile: LegacyFixture.instant(.sdk11NRF51(address: LegacyFixture.address)), clock: ContinuousClock())
        let bootloader = LegacyFixture.firmware(8192, seed: 21)
        let blPart = part("bootloader", .bootloader, LegacyStartSizes(bootloader: 8192), bootloader)
        var harness = LegacyHarness(device: device)
        try await harness.update([blPart])
        let afterBootloader = await device.state()
        #expect(LegacyEndToEnd.holds(afterBootloader, blPart))
        #expect(afterBootloader.mode == .application && afterBootloader.installed.application != nil)

        let softdevice = LegacyFixture.firmware(24_576, seed: 22)
        let sdPart = part("softdevice", .softdevice, LegacyStartSizes(softdevice: 24_576), softdevice)
        var second = LegacyHarness(device: device)
        try await second.update([sdPart])
        let afterSoftDevice = await device.state()
        #expect(afterSoftDevice.installed.softdevice?.sha256 == LegacyFixture.sha(softdevice))
        #expect(afterSoftDevice.installed.bootloader.sha256 == LegacyFixture.sha(bootloader))
        #expect(afterSoftDevice.mode == .bootloader && afterSoftDevice.installed.application == nil)
    }

    /// InfiniTime: the DFU service is in the application, no jump; the image is installed after Activate.
    @Test func pineTime() async throws {
        let device = VirtualLegacyDevice(profile: LegacyFixture.instant(.pineTime(address: LegacyFixture.address)), clock: ContinuousClock())
        var harness = LegacyHarness(device: device)
        let part = LegacyFixture.application(Self.image)
        try await harness.update([part])
        #expect(LegacyEndToEnd.holds(await device.state(), part))
        #expect(harness.jumps == 0)
        #expect(harness.modes == [.applicationService(version: .sdk11)])
    }

    /// A lost link at seeded byte counts: the device keeps its transfer state, answers the next Start with
    /// "invalid state", is reset and comes back (dual bank: as its old application, so a jump again), and the image
    /// is sent again from zero; every run ends with the image checked on the device.
    @Test(arguments: [(7 as UInt64, 1 as UInt64), (7, 2_020), (11, 3_333), (13, 5_980)])
    func disconnectsAtSeededOffsets(seed: UInt64, afterBytes: UInt64) async throws {
        let faults = try FaultPlan(parsing: "seed=\(seed),disconnect-after-bytes=\(afterBytes)")
        let device = VirtualLegacyDevice(
            profile: LegacyFixture.instant(.sdk11NRF51(address: LegacyFixture.address)), faults: faults, clock: ContinuousClock())
        var harness = LegacyHarness(device: device)
        let part = LegacyFixture.application(Self.image)
        try await harness.update([part])
        let state = await device.state()
        #expect(LegacyEndToEnd.holds(state, part))
        #expect(harness.journal.restarts.map(\.code) == ["disconnected", "device-reset"])
        #expect(harness.journal.restarts.first?.bytesResent ?? 0 >= Int(afterBytes))
        #expect(harness.misplaced.isEmpty, "\(harness.misplaced)")
        #expect(harness.jumps == 2)
        #expect(state.faults.count == 1)
    }

    /// Single bank (Adafruit): the same loss leaves the device without its application; the reset brings it back
    /// into the bootloader (restart_into_bootloader), and the rerun finishes it.
    @Test func singleBankDeviceThatLostItsApplication() async throws {
        let faults = try FaultPlan(parsing: "disconnect-after-bytes=3000")
        let device = VirtualLegacyDevice(
            profile: LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address)), faults: faults, clock: ContinuousClock())
        var harness = LegacyHarness(device: device)
        let part = LegacyFixture.application(Self.image, deviceType: 0x0052)
        await #expect(throws: LegacyDFUError.self) { try await harness.update([part], connectionLimit: 2) }
        let stranded = await device.state()
        #expect(stranded.installed.application == nil && stranded.mode == .bootloader)
        try await harness.update([part])
        #expect(LegacyEndToEnd.holds(await device.state(), part))
    }
}

/// What a Legacy device keeps across a power cycle, and its status snapshot.
@Suite(.timeLimit(.minutes(10))) struct LegacyPersistenceTests {
    /// Power loss in the middle of an image on a single-bank device: the persistent state (as JSON) says bootloader,
    /// no application; a device restored from it advertises its bootloader at address + 1, and an update finishes it.
    @Test func powerLossOnSingleBankThenRestore() async throws {
        let faults = try FaultPlan(parsing: "power-loss-after-bytes=2000")
        let profile = LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address))
        let sink = SnapshotSink()
        let device = VirtualLegacyDevice(
            profile: profile, faults: faults, clock: ContinuousClock(), statusSink: { await sink.add($0) })
        var harness = LegacyHarness(device: device)
        let part = LegacyFixture.application(EndToEndTests.image, deviceType: 0x0052)
        await #expect(throws: LegacyDFUError.self) { try await harness.update([part], connectionLimit: 2) }
        let saved = try JSONEncoder().encode(await device.persistentState())
        let restoredState = try JSONDecoder().decode(LegacyPersistentState.self, from: saved)
        #expect(restoredState.mode == .bootloader && restoredState.installed.application == nil)
        #expect(restoredState.family == "legacy")
        let restored = VirtualLegacyDevice(profile: profile, clock: ContinuousClock(), restoring: restoredState)
        #expect(await restored.currentAdvertisement.peer.address == LegacyFixture.address.nordicBootloaderAddress)
        var rerun = LegacyHarness(device: restored)
        try await rerun.update([part])
        #expect(LegacyEndToEnd.holds(await restored.state(), part))
        // The status snapshots went out as JSON with the transfer in them.
        let snapshots = await sink.states
        #expect(snapshots.contains { $0.transfer.state == "rx_data_pkt" })
        let json = String(decoding: try JSONEncoder().encode(snapshots[0]), as: UTF8.self)
        #expect(json.contains("\"family\":\"legacy\"") && json.contains("\"bank_0\""))
    }
}

actor SnapshotSink {
    var states: [LegacyDeviceState] = []
    func add(_ state: LegacyDeviceState) { states.append(state) }
}
