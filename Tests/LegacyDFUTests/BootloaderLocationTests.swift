import BLECore
import DFUSimulator
import GATT
import LegacyDFU
import Testing
import VirtualRadio

/// Where a Legacy bootloader advertises after the buttonless jump, over real SEQPACKET socket pairs. Whole updates
/// (detection, the jump, the parts, restarts) run through the shipped updater: BledfuKitTests' LegacyUpdaterTests,
/// LegacyEndToEndTests and LegacyCorpusUpdaterTests.
@Suite(.timeLimit(.minutes(10))) struct BootloaderLocationTests {
    /// One connection: the device serves one end, the test gets a GATT client on the other.
    static func connect(_ device: VirtualLegacyDevice) async throws -> (GATTClient, Task<Void, Never>) {
        let (client, server) = try SeqPacketBearer.makePair()
        let serving = Task { await device.serve(server) }
        let att = ATTClient(bearer: client)
        _ = try await att.exchangeMTU()
        return (GATTClient(att: att), serving)
    }

    /// SDK 11 keeps the address and advertises directed after the jump (peer data); Adafruit keeps it undirected;
    /// without peer data the bootloader is at address + 1 with its name.
    @Test func whereTheBootloaderAdvertises() async throws {
        let sdk11 = VirtualLegacyDevice(profile: LegacyFixture.instant(.sdk11NRF52(address: LegacyFixture.address)), clock: ContinuousClock())
        let (gatt, serving) = try await Self.connect(sdk11)
        let transport = try await GATTLegacyTransport.open(client: gatt)
        _ = try await LegacyButtonless.enterBootloader(over: transport, address: LegacyFixture.address, version: transport.version)
        await serving.value
        let directed = await sdk11.currentAdvertisement
        #expect(directed.peer.address == LegacyFixture.address && directed.data.isEmpty)
        #expect(await sdk11.state().directedAdvertising)

        var profile = LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address))
        let adafruit = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        let (gatt2, serving2) = try await Self.connect(adafruit)
        let transport2 = try await GATTLegacyTransport.open(client: gatt2)
        _ = try await LegacyButtonless.enterBootloader(over: transport2, address: LegacyFixture.address, version: transport2.version)
        await serving2.value
        let undirected = await adafruit.currentAdvertisement
        #expect(undirected.peer.address == LegacyFixture.address)
        #expect(undirected.parsed.name == "AdaDFU")
        #expect(undirected.parsed.serviceUUIDs.contains(LegacyDFUUUID.service))

        profile.peerDataHandover = false
        let plain = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        let (gatt3, serving3) = try await Self.connect(plain)
        let transport3 = try await GATTLegacyTransport.open(client: gatt3)
        _ = try await LegacyButtonless.enterBootloader(over: transport3, address: LegacyFixture.address, version: transport3.version)
        await serving3.value
        let plusOne = await plain.currentAdvertisement
        #expect(plusOne.peer.address == LegacyFixture.address.nordicBootloaderAddress)
        #expect(plusOne.parsed.name == "AdaDFU")
    }
}
