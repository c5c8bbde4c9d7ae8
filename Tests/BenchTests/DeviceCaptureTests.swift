import DFUSimulator
import LinuxIO
import Testing

@testable import Bench

/// `bench --device` (issue 18 point 4): the ATT_MTU and the packets per connection event of a real device's link,
/// read from the capture of its `bledfu flash` run (btsnoop records as `BTSnoopWriter` writes them), and the
/// ceiling and bound computed from them as for a virtual cell.
@Suite(.timeLimit(.minutes(5))) struct DeviceCaptureTests {
    /// A capture: the MTU exchange, then `objects` bursts of `packets` Write Commands of `attBytes`, each closed by
    /// Calculate Checksum and answered `answerAfter` µs after its first packet went out (`slowAnswer`: one burst
    /// answered late, as behind a slow flash; `shortBurst`: a short burst answered at once).
    static func capture(
        clientMTU: Int = 247, serverMTU: Int = 247, packets: Int, attBytes: Int, answerAfter: Int64, objects: Int = 3
    ) -> [UInt8] {
        var bytes = BTSnoopWriter.fileHeader
        var now: Int64 = 1_700_000_000_000_000
        func add(_ pdu: [UInt8], sent: Bool) {
            bytes += BTSnoopWriter.record(pdu: pdu, sent: sent, handle: 0x40, unixMicroseconds: now)
        }
        add([0x02, UInt8(clientMTU & 0xFF), UInt8(clientMTU >> 8)], sent: true)
        now += 15_000
        add([0x03, UInt8(serverMTU & 0xFF), UInt8(serverMTU >> 8)], sent: false)
        for object in 0..<objects {
            now += 30_000
            let start = now
            for _ in 0..<packets { add([0x52, 0x10, 0x00] + [UInt8](repeating: 0xAB, count: attBytes - 3), sent: true) }
            add([0x12, 0x0E, 0x00, 0x03], sent: true)
            // The second object went out behind a slow flash: answered three times as late.
            now = start + (object == 1 ? answerAfter * 3 : answerAfter)
            add([0x13], sent: false)
            add([0x1B, 0x0E, 0x00, 0x60, 0x03, 0x01], sent: false)
        }
        // A short burst (fewer than `DeviceCapture.minimumBurst` packets) answered at once says nothing.
        now += 30_000
        for _ in 0..<3 { add([0x52, 0x10, 0x00, 0x01], sent: true) }
        now += 1_000
        add([0x13], sent: false)
        return bytes
    }

    @Test func theMTUIsTheSmallerOfBothSides() throws {
        let capture = try DeviceCapture(
            btsnoop: Self.capture(clientMTU: 247, serverMTU: 185, packets: 16, attBytes: 185, answerAfter: 75_000))
        #expect(capture.mtu == 185)
        #expect(capture.bursts.count == 4)
        #expect(capture.bursts.first?.packets == 16)
        #expect(capture.bursts.first?.attBytes == 185)
    }

    /// 16 packets at 4 per event on a 15 ms interval fill 4 events; the answer comes in the fifth (75 ms after the
    /// first packet): 4 packets per event. The late burst (behind the flash) and the short one do not change it.
    @Test func packetsPerEventFromTheFastestBurst() throws {
        let capture = try DeviceCapture(btsnoop: Self.capture(packets: 16, attBytes: 247, answerAfter: 75_000))
        #expect(capture.packetsPerEvent(connectionIntervalMs: 15, dataLength: 251) == 4)
        // With an LL data length of 27 each 247-byte PDU is 10 fragments: 160 fragments in 4 events.
        #expect(capture.packetsPerEvent(connectionIntervalMs: 15, dataLength: 27) == 40)
        // A link whose events came twice as often carried half as many per event.
        #expect(capture.packetsPerEvent(connectionIntervalMs: 7.5, dataLength: 251) == 2)
    }

    @Test func noLongBurstNoFigure() throws {
        let capture = try DeviceCapture(btsnoop: Self.capture(packets: 5, attBytes: 247, answerAfter: 30_000))
        #expect(capture.packetsPerEvent(connectionIntervalMs: 15, dataLength: 251) == nil)
        #expect(throws: DeviceCapture.FormatError.self) { try DeviceCapture(btsnoop: Array("not a capture at all".utf8)) }
        // A capture cut short in its last record (a killed run) keeps the records before it.
        let whole = Self.capture(packets: 16, attBytes: 247, answerAfter: 75_000)
        let cut = try DeviceCapture(btsnoop: Array(whole.dropLast(5)))
        #expect(cut.records.count == (try DeviceCapture(btsnoop: whole)).records.count - 1)
    }

    /// The link line and the capture together: the ceiling and the bound of the link the device got, as a virtual
    /// cell's on the same link model (the bracelet-lossy profile's link: 2M, LL 251, 15 ms, 4 per event).
    @Test func aRunGetsTheCeilingAndBoundOfItsLink() throws {
        let capture = try DeviceCapture(btsnoop: Self.capture(packets: 16, attBytes: 247, answerAfter: 75_000))
        let line = "bledfu: link: interval 15 ms, latency 0, timeout 4000 ms; PHY 2M/2M (tx/rx); data length 251/251 bytes (tx/rx)"
        let link = try #require(DeviceLink(reportLine: line, capture: capture))
        #expect(link.mtu == 247 && link.packetsPerEvent == 4 && link.packetsPerEventMeasured)
        var run = BenchRun(mode: "adaptive", profile: "device", imageBytes: 4096, repetition: 1)
        link.fill(&run)
        let expected = LinkModel(
            link: LinkParameters(phy: "2M", llDataLength: 251, maxMTU: 247, connectionIntervalMs: 15, packetsPerEvent: 4),
            flash: FlashParameters(pageSize: 4096, pageEraseMicros: 0, wordWriteMicros: 0, queueDepth: 1 << 20))
        #expect(run.mtu == 247)
        #expect(run.ceilingBytesPerSecond == expected.ceiling(mtu: 247).airWriteWithoutResponse)
        #expect(run.protocolBoundBytesPerSecond == expected.protocolBound(mtu: 247, objectSize: 4096))
        #expect(run.protocolBoundBytesPerSecond < run.ceilingBytesPerSecond)
        // Without a capture: the default MTU (23) and the assumed 6 per event, marked as assumed.
        let bare = try #require(DeviceLink(reportLine: line, capture: nil))
        #expect(bare.mtu == 23 && bare.packetsPerEvent == 6 && !bare.packetsPerEventMeasured)
    }
}
