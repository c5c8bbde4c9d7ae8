import ATT
import BLECore
import GATT
import TestDoubles
import Testing

@testable import DFUSimulator

/// Legacy DFU and MCUmgr SMP links share their central adapter's air as Secure DFU links do (docs/simulator.md "One
/// controller per central adapter"): one kind of link for every family of virtual device.
@Suite("Every family's link shares the central adapter's air", .timeLimit(.minutes(2)))
struct SharedAirFamiliesTests {
    static let address = Fixture.profile().address

    /// Client sends 02 F7 00 (Exchange MTU Request, 247); the device answers 03 <its MTU>: it is serving the link.
    static func exchangeMTU(_ central: any ATTBearer) async throws {
        try await central.send(ATTPDU.exchangeMTURequest(clientRxMTU: 247).encoded)
        guard case .exchangeMTUResponse = try ATTPDU(decoding: try await central.receive()) else {
            Issue.record("no Exchange MTU Response")
            return
        }
    }

    @Test("A Legacy device serving a link from adapter hciA holds one seat on hciA; when the link ends, none")
    func legacyLinkHoldsASeat() async throws {
        let air = SharedAir { adapter in adapter == "hciA" ? .generic : nil }
        let device = VirtualLegacyDevice(
            profile: .sdk11NRF52(address: Self.address), clock: ContinuousClock(), sharedAir: air)
        let (central, peripheral) = InMemoryBearer.makePair(capacity: 64)
        let serving = Task { await device.serve(NamedCentralBearer(peripheral, adapter: "hciA")) }
        try await Self.exchangeMTU(central)
        #expect(air.linkCounts() == ["hciA": 1])
        await central.close()
        await serving.value
        #expect(air.linkCounts().isEmpty)
    }

    @Test("An SMP device serving a link from adapter hciA holds one seat on hciA; when the link ends, none")
    func smpLinkHoldsASeat() async throws {
        let air = SharedAir { adapter in adapter == "hciA" ? .generic : nil }
        let device = VirtualSMPDevice(
            profile: SMPDeviceProfile(name: "SMP Air", address: Self.address), clock: ContinuousClock(), sharedAir: air)
        let (central, peripheral) = InMemoryBearer.makePair(capacity: 64)
        let serving = Task { await device.serve(NamedCentralBearer(peripheral, adapter: "hciA")) }
        try await Self.exchangeMTU(central)
        #expect(air.linkCounts() == ["hciA": 1])
        await central.close()
        await serving.value
        #expect(air.linkCounts().isEmpty)
    }

    @Test("A Legacy link's Write Commands take longer while fifteen other links share its adapter's radio")
    func pacerSlowsOnASharedRadio() throws {
        let profile = LegacyDeviceProfile.sdk11NRF52(address: Self.address)
        let model = LinkModel(link: profile.link, flash: profile.flash)
        let air = SharedAir { _ in .generic }
        let pacer = LinkPacer(model: model, speedup: 1, sharedAir: air)
        var info = LinkInfo(maximumPDUSize: 23)
        info.centralAdapter = "hciA"
        let seat = pacer.connected(info, at: .zero)
        #expect(seat != nil)
        // A 20-byte packet: Write Command header 3 + 20 bytes of image data.
        let alone = pacer.cost(attBytes: 23, request: false, now: .seconds(10))
        let others = (0..<15).compactMap { _ in air.join(adapter: "hciA", model: model) }
        #expect(others.count == 15)
        let shared = pacer.cost(attBytes: 23, request: false, now: .seconds(20))
        #expect(shared > alone, "alone \(alone), with 15 others \(shared)")
        // A request's round trip is the link's own (the controller's share is in the Write Command rate).
        for other in others { air.leave(other) }
        let again = pacer.cost(attBytes: 23, request: false, now: .seconds(30))
        #expect(again == alone)
        pacer.disconnected(seat)
        #expect(air.linkCounts().isEmpty)
    }
}
