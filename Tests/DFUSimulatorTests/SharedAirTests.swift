import ATT
import BLECore
import GATT
import TestDoubles
import Testing

@testable import DFUSimulator

/// The simulator's side of one controller per central adapter (docs/simulator.md): links of one adapter share its
/// air, links of different adapters do not, an unmodelled adapter's links keep their own air.
@Suite("Shared air of a central adapter", .timeLimit(.minutes(2)))
struct SharedAirTests {
    /// The bracelet's link (Firmware/bracelet.json): 1M, LL 27, MTU 247, CI 30 ms, 6 per event.
    func bracelet() throws -> LinkModel { ControllerAirTests.bracelet }

    @Test("Sixteen bracelets on one adapter each run at well under their rate alone; the adapter carries at most its air")
    func sixteenBraceletsShareOneRadio() throws {
        let model = try bracelet()
        let air = SharedAir { _ in .generic }
        let seats = (0..<16).compactMap { _ in air.join(adapter: "hciA", model: model) }
        #expect(seats.count == 16)
        let speeds = seats.map(air.speed)
        // One bracelet occupies about an eighth of the radio: sixteen get about 1 / (16 × 1/8) ≈ 0.5 of their rate.
        #expect(speeds.allSatisfy { $0 < 0.6 && $0 > 0.3 }, "\(speeds)")
        let plan = try #require(air.plan(adapter: "hciA"))
        #expect(plan.airInUse <= 1 + 1e-9)
        // One link alone is as fast as before; a link on another adapter does not share.
        let other = try #require(air.join(adapter: "hciB", model: model))
        #expect(air.speed(other) == 1)
        for seat in seats.dropFirst() { air.leave(seat) }
        #expect(air.speed(seats[0]) == 1)
        #expect(air.linkCounts() == ["hciA": 1, "hciB": 1])
    }

    @Test("An adapter without a controller profile is not modelled: no seat, the link keeps its air")
    func unmodelledAdapter() throws {
        let air = SharedAir { adapter in adapter == "modelled" ? .generic : nil }
        #expect(air.join(adapter: "plain", model: try bracelet()) == nil)
        #expect(air.join(adapter: "modelled", model: try bracelet()) != nil)
    }

    @Test("The estimate: seven bracelets nearly fit one radio, sixteen carry no more than the radio does")
    func estimateBoundsTheAggregate() throws {
        let model = try bracelet()
        let alone = model.ceiling().writeWithoutResponse
        let one = SharedAir.estimate(model: model, links: 1, eventLengthMicros: nil)
        #expect(abs(one.aggregate - alone) < 1)
        let sixteen = SharedAir.estimate(model: model, links: 16, eventLengthMicros: nil)
        #expect(sixteen.aggregate < 10 * alone)
        #expect(sixteen.perLink < 0.6 * alone)
        // A fixed event length (S140: 3.75 ms) carries less per event than a 30 ms interval allows.
        let s140 = SharedAir.estimate(model: model, links: 1, eventLengthMicros: 3750)
        #expect(s140.perLink < one.perLink)
    }
}

/// A device's end of a link that says which central adapter it comes from (as the virtual radio's accept does).
final class NamedCentralBearer: ATTBearer {
    let base: any ATTBearer
    let adapter: String
    init(_ base: any ATTBearer, adapter: String) {
        self.base = base
        self.adapter = adapter
    }
    var linkInfo: LinkInfo {
        var info = base.linkInfo
        info.centralAdapter = adapter
        return info
    }
    func send(_ pdu: [UInt8]) async throws(BearerError) { try await base.send(pdu) }
    func receive() async throws(BearerError) -> [UInt8] { try await base.receive() }
    func close() async { await base.close() }
}

@Suite("A virtual device takes its seat on the central adapter's air", .timeLimit(.minutes(2)))
struct VirtualDeviceSharedAirTests {
    @Test("While a link from adapter hciA is served, the device holds one seat on hciA; when it ends, none")
    func servedLinkHoldsASeat() async throws {
        let air = SharedAir { adapter in adapter == "hciA" ? .generic : nil }
        let device = VirtualDevice(profile: Fixture.profile(), clock: ManualClock(), sharedAir: air)
        let (central, peripheral) = InMemoryBearer.makePair(capacity: 64)
        let serving = Task { await device.serve(NamedCentralBearer(peripheral, adapter: "hciA")) }
        // Client sends: 02 F7 00 (Exchange MTU Request, 247); the device answers 03 <its MTU>: it is serving.
        try await central.send(ATTPDU.exchangeMTURequest(clientRxMTU: 247).encoded)
        guard case .exchangeMTUResponse = try ATTPDU(decoding: try await central.receive()) else {
            Issue.record("no Exchange MTU Response")
            return
        }
        #expect(air.linkCounts() == ["hciA": 1])
        #expect(air.plan(adapter: "hciA")?.allotted.count == 1)
        await central.close()
        await serving.value
        #expect(air.linkCounts().isEmpty)
    }
}
