import DFUSimulator
import Foundation
import Testing

/// The protocol bound (docs/benchmarks.md): one object as an ideal host sends it over the modelled device.
@Suite("Protocol bound", .timeLimit(.minutes(5)))
struct ProtocolBoundTests {
    static func model(_ name: String) throws -> LinkModel {
        LinkModel(profile: try LinkModelTests.load(name))
    }

    @Test("Bracelet (air-bound): object air time plus two 60 ms round trips; nothing is held back")
    func bracelet() throws {
        let link = try Self.model("bracelet.json")
        let bound = link.protocolBoundDetail(mtu: 247, objectSize: 4096)
        let ceiling = link.ceiling(mtu: 247).writeWithoutResponse
        var air = 0.0
        for size in Array(repeating: 244, count: 16) + [192] { air += link.writeCommandMicros(attBytes: size + 3) }
        #expect(abs(bound.objectMicros - (air + 2 * 60_000)) < 1)
        #expect(bound.heldPackets == 0)
        print("protocol bound bracelet: \(bound.objectMicros) µs/object, \(bound.bytesPerSecond) B/s, "
            + "\(bound.bytesPerSecond / ceiling) of the ceiling \(ceiling)")
        #expect(bound.bytesPerSecond / ceiling < 0.9)
    }

    @Test("Sensor and fast (flash-bound): erase + writes + one 15 ms round trip per object")
    func flashBound() throws {
        for name in ["sensor.json", "fast.json"] {
            let link = try Self.model(name)
            let bound = link.protocolBoundDetail(mtu: 247, objectSize: 4096)
            let ceiling = link.ceiling(mtu: 247)
            // 85 ms erase + 1024 words × 41 µs, then the Execute answer and the next Create's round trip.
            #expect(abs(bound.objectMicros - (85_000 + 1024 * 41 + 15_000)) < 1)
            #expect(ceiling.writeWithoutResponse == ceiling.flash)
            print("protocol bound \(name): \(bound.objectMicros) µs/object, \(bound.bytesPerSecond) B/s, "
                + "\(bound.bytesPerSecond / ceiling.writeWithoutResponse) of the ceiling, held \(bound.heldPackets)")
            #expect(bound.bytesPerSecond / ceiling.writeWithoutResponse < 0.9)
        }
    }

    @Test("Bracelet-lossy: the queue of 2 holds packets back until the erase is done; still flash-bound")
    func lossy() throws {
        let link = try Self.model("bracelet-lossy.json")
        let bound = link.protocolBoundDetail(mtu: 247, objectSize: 4096)
        let ceiling = link.ceiling(mtu: 247)
        #expect(bound.heldPackets > 0)
        // At least the flash work plus one round trip, and the link can never beat the flash ceiling.
        #expect(bound.objectMicros >= 85_000 + 1024 * 67.5 + 30_000)
        #expect(bound.bytesPerSecond < ceiling.writeWithoutResponse)
        print("protocol bound bracelet-lossy: \(bound.objectMicros) µs/object, \(bound.bytesPerSecond) B/s, "
            + "\(bound.bytesPerSecond / ceiling.writeWithoutResponse) of the ceiling, held \(bound.heldPackets)")
    }

    /// The two lossy profiles of other shapes (issue 18 point 2): an nRF51 whose four 1 KiB page erases fill one
    /// slot of its queue of 4 for 88 ms after Create (20-byte packets at ATT_MTU 23 on a 1M link), and an nRF52840
    /// whose 3 receive buffers fill long before its queue of 16 (packets at 0.94 ms of air, 2.5 ms of flash each).
    @Test("nrf51-lossy and buffers-lossy: packets held back by the erase, by the queue or by the receive buffers")
    func otherLossyShapes() throws {
        let nrf51 = try Self.model("nrf51-lossy.json")
        let slow = nrf51.protocolBoundDetail(mtu: 23, objectSize: 4096)
        #expect(slow.heldPackets > 0)
        // One erase of 4 pages (88 ms) before the fourth packet can be queued, then 205 packets of 20 bytes on the air.
        var air = 0.0
        for _ in 0..<205 { air += nrf51.writeCommandMicros(attBytes: 23) }
        #expect(slow.objectMicros >= 88_000 + 2 * 15_000)
        #expect(slow.objectMicros >= air)
        #expect(slow.bytesPerSecond < nrf51.ceiling(mtu: 23).writeWithoutResponse)
        let buffers = try Self.model("buffers-lossy.json")
        let full = buffers.protocolBoundDetail(mtu: 247, objectSize: 4096)
        #expect(full.heldPackets > 0)
        // At least the flash work (85 ms + 1024 words × 41 µs) and the Execute/Create round trip, as sensor and fast;
        // more, because the last packets wait for a free buffer and Execute then for its round trip.
        #expect(full.objectMicros >= 85_000 + 1024 * 41 + 15_000)
        var deeper = buffers
        deeper.link.receiveBuffers = 32
        #expect(deeper.protocolBoundDetail(mtu: 247, objectSize: 4096).heldPackets < full.heldPackets)
        print("protocol bound nrf51-lossy: \(slow.objectMicros) µs/object, \(slow.bytesPerSecond) B/s, held \(slow.heldPackets); "
            + "buffers-lossy: \(full.objectMicros) µs/object, \(full.bytesPerSecond) B/s, held \(full.heldPackets)")
    }

    @Test("A deeper queue never lowers the bound; a zero-size object is 0")
    func monotone() throws {
        var link = try Self.model("bracelet-lossy.json")
        let shallow = link.protocolBound(mtu: 247, objectSize: 4096)
        link.flash.queueDepth = 32
        link.link.receiveBuffers = 17
        #expect(link.protocolBound(mtu: 247, objectSize: 4096) >= shallow)
        #expect(link.protocolBound(mtu: 247, objectSize: 0) == 0)
    }
}
