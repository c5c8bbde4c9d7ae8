import BLECore
import Foundation
import LinuxIO
import Testing
import VirtualRadio

/// Links in a capture (issue 19 point 7): each link's LE Connection Complete and Disconnection Complete and its
/// handle.
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

    /// Links without a transport handle take the lowest free one: 0x0000 for links one after the other (what keeps
    /// btmon 5.66 from crashing, see BTSnoopLink), 0x0001 for a second link open at the same time.
    @Test func handlesAreTheLowestFree() throws {
        let path = NSTemporaryDirectory() + "bledfu-capture-handles-\(UUID().uuidString).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BTSnoopWriter(path: path, now: { 0 })
        let first = writer.link(peer: Self.peer, connectionHandle: nil)
        let second = writer.link(peer: Self.peer, connectionHandle: nil)
        #expect(first.handle == 0x0000 && second.handle == 0x0001)
        first.linkEnded(byPeer: false)
        #expect(writer.link(peer: Self.peer, connectionHandle: nil).handle == 0x0000)
        writer.close()
    }

    /// Two links one after the other through CapturingBearers over real socket pairs: each opens with its Connection
    /// Complete (its peer's address), carries its PDUs on its handle and ends with its Disconnection Complete (closed
    /// here: 0x16; lost: 0x13).
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
            code: 0x3E, parameters: BTSnoopWriter.connectionComplete(handle: 0x0000, peer: Self.peer), unixMicroseconds: 0)
        expected += BTSnoopWriter.record(pdu: [0x0A, 0x03, 0x00], sent: true, handle: 0x0000, unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x05, parameters: BTSnoopWriter.disconnectionComplete(handle: 0x0000, reason: 0x16), unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x3E, parameters: BTSnoopWriter.connectionComplete(handle: 0x0000, peer: bootloader), unixMicroseconds: 0)
        expected += BTSnoopWriter.record(pdu: [0x1B, 0x03, 0x00, 0x2A], sent: false, handle: 0x0000, unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x05, parameters: BTSnoopWriter.disconnectionComplete(handle: 0x0000, reason: 0x13), unixMicroseconds: 0)
        #expect(bytes == expected)
    }

    /// A link whose transport reports its handle (BlueZ) keeps it; every PDU is recorded (characteristic discovery
    /// included).
    @Test func aReportedHandleIsKept() async throws {
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
            pdu: [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28], sent: true, handle: 0x0E01, unixMicroseconds: 0)
        expected += BTSnoopWriter.record(
            pdu: [0x09, 0x07, 0x02, 0x00, 0x02, 0x03, 0x00, 0x00, 0x2A], sent: false, handle: 0x0E01, unixMicroseconds: 0)
        expected += BTSnoopWriter.eventRecord(
            code: 0x05, parameters: BTSnoopWriter.disconnectionComplete(handle: 0x0E01, reason: 0x16), unixMicroseconds: 0)
        #expect(bytes == expected)
    }
}
