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
