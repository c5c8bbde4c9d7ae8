import ATT
import BLECore
import DFUSimulator
import GATT
import LegacyDFU
import Testing
import VirtualRadio

/// SDK 11's bootloader after the buttonless jump with the application's peer data (legacy-dfu.md §8.3,
/// `dfu_transport_ble.c advertising_start`): ADV_DIRECT_IND to the central that jumped, with no AD data, which only
/// that central sees and may connect from; after 50 × 1.28 s without a connection the DFU timeout ends the
/// bootloader and the (valid, dual-bank) application starts again. On the virtual radio a central is its adapter.
@Suite(.timeLimit(.minutes(2))) struct DirectedAdvertisingTests {
    static func link(from adapter: String?) throws -> (any ATTBearer, any ATTBearer) {
        var info = LinkInfo(maximumPDUSize: 517)
        info.centralAdapter = adapter
        return try SeqPacketBearer.makePair(linkInfo: info)
    }

    /// Connects from `adapter`, writes `01 04` to the application's Control Point: the device jumps.
    static func jump(_ device: VirtualLegacyDevice, from adapter: String) async throws {
        let (host, end) = try link(from: adapter)
        let serving = Task { await device.serve(end) }
        let att = ATTClient(bearer: host, transactionTimeout: .seconds(60), clock: ContinuousClock())
        let transport = try await GATTLegacyTransport.open(client: GATTClient(att: att))
        try? await transport.writeControlPoint([0x01, 0x04])
        await serving.value
        await att.close()
    }

    @Test func directedToTheCentralThatJumpedThenTimesOut() async throws {
        let address = BluetoothAddress("E1:5D:11:51:00:01")!
        var profile = LegacyDeviceProfile.sdk11NRF51(address: address)
        profile.speedup = .infinity
        let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock(), directedAdvertisingTime: .seconds(2))
        try await Self.jump(device, from: "station-a")
        var state = await device.state()
        #expect(state.mode == .bootloader && state.directedAdvertising && state.address == address.description)
        let advertisement = await device.currentAdvertisement
        #expect(advertisement.directedTo == "station-a" && advertisement.data.isEmpty)
        // The advertisement file says whom it is for; the scanner of another adapter skips it (VirtualRadio).
        #expect(AdvertisementFile.encode(advertisement).contains("directed_to=station-a\n"))
        #expect(try AdvertisementFile.parse(AdvertisementFile.encode(advertisement)) == advertisement)

        // Another central's connection request is not taken: the link ends at once, the bootloader waits on.
        let connections = state.counters.connections
        let (other, end) = try Self.link(from: "station-b")
        await device.serve(end)
        await other.close()
        state = await device.state()
        #expect(state.counters.connections == connections && state.mode == .bootloader && state.directedAdvertising)

        // No connection from station-a within the directed time: the bootloader exits into the application.
        let deadline = ContinuousClock.now + .seconds(60)
        while await device.mode == .bootloader, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        state = await device.state()
        #expect(state.mode == .application && !state.directedAdvertising, "\(state.mode)")
        #expect(await device.currentAdvertisement.directedTo == nil)
    }

    /// A connection from the central that jumped stops the timer; a disconnect starts it again (the SDK resets its
    /// count of directed rounds on a disconnect).
    @Test func theJumpingCentralConnects() async throws {
        let address = BluetoothAddress("E1:5D:11:51:00:01")!
        var profile = LegacyDeviceProfile.sdk11NRF51(address: address)
        profile.speedup = .infinity
        let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock(), directedAdvertisingTime: .seconds(3))
        try await Self.jump(device, from: "station-a")
        let (host, end) = try Self.link(from: "station-a")
        let serving = Task { await device.serve(end) }
        let att = ATTClient(bearer: host, transactionTimeout: .seconds(60), clock: ContinuousClock())
        let transport = try await GATTLegacyTransport.open(client: GATTClient(att: att))
        #expect(transport.version == .sdk11)
        // Connected past the directed time: no timeout while connected.
        try await Task.sleep(for: .seconds(4))
        #expect(await device.mode == .bootloader)
        await att.close()
        await serving.value
        #expect(await device.state().directedAdvertising)
    }
}
