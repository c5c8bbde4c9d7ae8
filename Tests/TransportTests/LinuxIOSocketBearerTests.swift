import BLECore
import LinuxIO
import SystemPackage
import Testing
import VirtualRadio

/// SocketBearer over real socketpair(AF_UNIX, SOCK_SEQPACKET).
@Suite(.timeLimit(.minutes(5))) struct LinuxIOSocketBearerTests {
    /// Yields until the reactor holds `count` waits on `fd` (the operation has really suspended). No sleeping:
    /// each iteration lets other tasks run; the reactor thread registers within a few iterations.
    func waitUntilSuspended(_ fd: SocketDescriptor?, count: Int = 1) async {
        guard let fd else { return }
        var spins = 0
        while Reactor.shared.pendingWaitCount(on: fd.rawValue) < count && spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
        #expect(Reactor.shared.pendingWaitCount(on: fd.rawValue) >= count, "the operation never suspended")
    }

    @Test func messageBoundariesAreKept() async throws {
        let (a, b) = try SeqPacketBearer.makePair()
        // Exchange MTU Request (0x02, client Rx MTU 517), then Read Request (0x0A, handle 0x0003).
        try await a.send([0x02, 0x05, 0x02])
        try await a.send([0x0A, 0x03, 0x00])
        try await a.send(Array(repeating: 0x55, count: 517))
        #expect(try await b.receive() == [0x02, 0x05, 0x02])
        #expect(try await b.receive() == [0x0A, 0x03, 0x00])
        #expect(try await b.receive() == Array(repeating: 0x55, count: 517))
        try await b.send([0x03, 0x05, 0x02])
        #expect(try await a.receive() == [0x03, 0x05, 0x02])
        await a.close()
        await b.close()
    }

    @Test func receiveSuspendsUntilAMessageArrives() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        async let received = b.receive()
        await waitUntilSuspended(b.socket)
        try await a.send([0x1B, 0x05, 0x00, 0x01])
        #expect(try await received == [0x1B, 0x05, 0x00, 0x01])
    }

    @Test func fullSendBufferSuspendsTheSenderUntilDrained() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        let fd = try #require(a.socket)
        try fd.setSendBufferSize(4096)
        // Fill the socket directly until the kernel says EAGAIN.
        let filler = Array(repeating: UInt8(0x52), count: 200)
        var queued = 0
        while case .processed = try fd.send(filler) { queued += 1 }
        #expect(queued > 0)
        // The bearer's send must now suspend (waiting for writability), not fail and not drop.
        let marker: [UInt8] = [0x52, 0x07, 0x00, 0xEE]
        let sender = Task { try await a.send(marker) }
        await waitUntilSuspended(a.socket)
        #expect(Reactor.shared.pendingWaitCount(on: fd.rawValue) == 1)
        // Drain: the sender resumes and its PDU arrives after every queued one.
        for _ in 0..<queued { #expect(try await b.receive() == filler) }
        try await sender.value
        #expect(try await b.receive() == marker)
    }

    @Test func closeEndsPendingReceiveWithClosed() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()  // b stays open: its close would be a disconnect
        let receiver = Task { try await a.receive() }
        await waitUntilSuspended(a.socket)
        await a.close()
        await b.close()
        await #expect(throws: BearerError(.closed)) { _ = try await receiver.value }
        await #expect(throws: BearerError(.closed)) { try await a.send([0x01]) }
        await a.close()  // idempotent
        #expect(a.socket == nil)
    }

    @Test func peerCloseIsDisconnected() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        let receiver = Task { try await b.receive() }
        await waitUntilSuspended(b.socket)
        await a.close()
        await #expect(throws: BearerError(.disconnected)) { _ = try await receiver.value }
        await #expect(throws: BearerError(.disconnected)) { try await b.send([0x01]) }
    }

    @Test func linkLimitRejectsOversizedPDU() async throws {
        let (a, _) = try SeqPacketBearer.makePair(linkInfo: LinkInfo(maximumPDUSize: 23))
        await #expect(throws: BearerError(.pduTooLarge)) { try await a.send(Array(repeating: 0, count: 24)) }
    }

    @Test func cancellingAWaitEndsIt() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        let receiver = Task { try await a.receive() }
        await waitUntilSuspended(a.socket)
        receiver.cancel()
        await #expect(throws: BearerError(.closed)) { _ = try await receiver.value }
        let socket = try #require(a.socket)
        #expect(Reactor.shared.pendingWaitCount(on: socket.rawValue) == 0)
        await b.close()
    }

    @Test func waitTimesOut() async throws {
        let (a, b) = try SocketDescriptor.seqPacketPair()
        defer {
            try? a.close()  // test teardown
            try? b.close()
        }
        await #expect(throws: Errno.timedOut) { try await a.waitReadable(timeout: .milliseconds(20)) }
    }
}
