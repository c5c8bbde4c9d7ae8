import BLECore
import Foundation
import LinuxIO
import Testing
import VirtualRadio

/// Links in a capture (issue 19 point 7): each link's LE Connection Complete and Disconnection Complete, its own
/// handle, and the Read By Type Requests btmon 5.66 crashes on left out.
@Suite(.timeLimit(.minutes(5))) struct CaptureLinkTests {
    static let peer = PeerAddress(BluetoothAddress("C6:05:04:03:02:01")!, type: .random)

    @Test func connectionCompleteBytes() {
        #expect(
            BTSnoopWriter.connectionComplete(handle: 0x0041, peer: Self.peer) == [
                0x01, 0x00,  // LE Connection Complete, success
                0x41, 0x00,  // handle
                0x00, 0x01,  // central, random
                0x01, 0x02, 0x03, 0x04, 0x05, 0xC6,  // the address, little-endian
                0x18, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00,
            ])
        #expect(BTSnoopWriter.disconnectionComplete(handle: 0x0041, reason: 0x16) == [0x00, 0x41, 0x00, 0x16])
        let record = BTSnoopWriter.eventRecord(code: 0x05, parameters: [0x00, 0x41, 0x00, 0x16], unixMicroseconds: 0)
        #expect(record[8..<12] == [0, 0, 0, 3])  // flags: event, received
        #expect(Array(record[24...]) == [0x04, 0x05, 0x04, 0x00, 0x41, 0x00, 0x16])
    }

    @Test func btmon566CrashingRequestsAreRecognised() {
        #expect(BTSnoopWriter.tripsBtmon566([0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28]))  // Characteristic
        #expect(BTSnoopWriter.tripsBtmon566([0x08, 0x0A, 0x00, 0x10, 0x00, 0x02, 0x29]))  // CCCD
        let base: [UInt8] = [0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, 0x03, 0x28, 0x00, 0x00]
        #expect(BTSnoopWriter.tripsBtmon566([0x08, 0x01, 0x00, 0xFF, 0xFF] + base))
        #expect(!BTSnoopWriter.tripsBtmon566([0x08, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x2A]))  // Device Name: no decoder
        #expect(!BTSnoopWriter.tripsBtmon566([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]))  // Read By Group Type
        #expect(!BTSnoopWriter.tripsBtmon566([0x09, 0x07, 0x03, 0x28]))
    }

    /// Two links through CapturingBearers over real socket pairs: each opens with its Connection Complete on its own
    /// handle, carries its PDUs on that handle and ends with its Disconnection Complete (closed here: 0x16; lost: 0x13).
    @Test func eachLinkHasItsConnectionAndDisconnection() async throws {
        let path = NSTemporaryDirectory() + "bledfu-capture-links-\(UUID().uuidString).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BTSnoopWriter(path: path, now: { 0 })
        let (firstClient, firstServer) = try SeqPacketBearer.makePair()
        let first = CapturingBearer(wrapping: firstClient, observers: [writer.link(peer: Self.peer, connectionHandle: nil)])
        try await first.send([0x0A, 0x03, 0x00])
        _ = try await firstServer.receive()
        await first.close()
        let bootloader = PeerAddress(BluetoothAddress("C6:05:04:03:02:02")!, type: .random)
        let (secondClient, secondServer) = try SeqPacketBearer.makePair()
        let second = CapturingBearer(wrapping: secondClient, observers: [writer.link(peer: bootloader, connectionHandle: nil)])
        try await secondServer.send([0x1B, 0x03, 0x00, 0x2A])
        _ = try await second.receive()
        await secondServer.close()
        await #expect(throws: BearerError.self) { _ = try await second.receive() }
        await second.close()  // already ended by the peer: no second Disconnection Complete
        writer.close()

        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var expected = BTSnoopWriter.fileHeader
        expected += BTSnoopWriter.eventRecord(
            code: 0x3E, parameters: BTSnoopWriter.connectionComplete(handle: 0x0040, peer: Self.peer), unixMicroseconds: 0)
        expected += BTSnoopWriter.record(pdu: [0x0A, 0x03, 0x00], sent: true, handle: 0x0040, unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x05, parameters: BTSnoopWriter.disconnectionComplete(handle: 0x0040, reason: 0x16), unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x3E, parameters: BTSnoopWriter.connectionComplete(handle: 0x0041, peer: bootloader), unixMicroseconds: 0)
        expected += BTSnoopWriter.record(pdu: [0x1B, 0x03, 0x00, 0x2A], sent: false, handle: 0x0041, unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x05, parameters: BTSnoopWriter.disconnectionComplete(handle: 0x0041, reason: 0x13), unixMicroseconds: 0)
        #expect(bytes == expected)
    }

    /// A link whose transport reports its handle (BlueZ) keeps it; the Read By Type Request for characteristics is
    /// left out, its response kept.
    @Test func aReportedHandleIsKeptAndCrashingRequestsLeftOut() async throws {
        let path = NSTemporaryDirectory() + "bledfu-capture-handle-\(UUID().uuidString).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BTSnoopWriter(path: path, now: { 0 })
        let link = writer.link(peer: Self.peer, connectionHandle: 0x0E01)
        #expect(link.handle == 0x0E01)
        link.observe(pdu: [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28], sent: true)
        link.observe(pdu: [0x09, 0x07, 0x02, 0x00, 0x02, 0x03, 0x00, 0x00, 0x2A], sent: false)
        link.linkEnded(byPeer: false)
        link.linkEnded(byPeer: true)  // once only
        writer.close()
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var expected = BTSnoopWriter.fileHeader
        expected += BTSnoopWriter.eventRecord(
            code: 0x3E, parameters: BTSnoopWriter.connectionComplete(handle: 0x0E01, peer: Self.peer), unixMicroseconds: 0)
        expected += BTSnoopWriter.record(
            pdu: [0x09, 0x07, 0x02, 0x00, 0x02, 0x03, 0x00, 0x00, 0x2A], sent: false, handle: 0x0E01, unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x05, parameters: BTSnoopWriter.disconnectionComplete(handle: 0x0E01, reason: 0x16), unixMicroseconds: 0)
        #expect(bytes == expected)
    }
}
