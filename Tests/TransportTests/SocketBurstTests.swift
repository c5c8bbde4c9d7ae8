import BLECore
import LinuxIO
import Synchronization
import SystemPackage
import Testing
import VirtualRadio

/// Bursts over real socketpair(AF_UNIX, SOCK_SEQPACKET): `send(burst:)` (sendmmsg) and `receive(upTo:)` (recvmmsg)
/// keep every PDU whole and in order, exactly as one `send` / `receive` per PDU would.
@Suite(.timeLimit(.minutes(5))) struct SocketBurstTests {
    /// PDU `index` of a test burst: a Write Command whose value names its index and has its own length.
    static func pdu(_ index: Int) -> [UInt8] {
        [0x52, 0x10, 0x00, UInt8(index & 0xFF), UInt8(index >> 8)] + [UInt8](repeating: UInt8(index & 0xFF), count: index % 40)
    }

    /// Collects `count` PDUs with `receive(upTo:)`; every call returns at least one and at most `upTo`.
    static func collect(_ bearer: any ATTBearer, count: Int, upTo: Int) async throws -> [[UInt8]] {
        var received: [[UInt8]] = []
        while received.count < count {
            let batch = try await bearer.receive(upTo: upTo)
            #expect(!batch.isEmpty && batch.count <= upTo)
            received += batch
        }
        return received
    }

    @Test func aBurstArrivesWholeAndInOrder() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        let burst = (0..<100).map(Self.pdu)  // more than one sendmmsg call (64 at most) and one recvmmsg (32)
        try await a.send(burst: burst)
        let received = try await Self.collect(b, count: burst.count, upTo: 64)
        #expect(received == burst)
        await a.close()
        await b.close()
    }

    @Test func aBurstLargerThanTheSendBufferWaitsForTheReceiver() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        try #require(a.socket).setSendBufferSize(4096)
        let burst = (0..<300).map { Self.pdu($0) + [UInt8](repeating: 0xEE, count: 200) }
        // The kernel takes part of the burst, then EAGAIN: the sender waits for writability and goes on with the
        // PDUs not taken yet (none lost, none twice).
        let sender = Task { try await a.send(burst: burst) }
        let received = try await Self.collect(b, count: burst.count, upTo: 32)
        try await sender.value
        #expect(received == burst)
    }

    @Test func singleAndBurstCallsMix() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        try await a.send([0x12, 0x0E, 0x00, 0x03])
        try await a.send(burst: [Self.pdu(1), Self.pdu(2)])
        try await a.send([0x12, 0x0E, 0x00, 0x04])
        #expect(try await b.receive() == [0x12, 0x0E, 0x00, 0x03])
        #expect(try await Self.collect(b, count: 3, upTo: 8) == [Self.pdu(1), Self.pdu(2), [0x12, 0x0E, 0x00, 0x04]])
    }

    @Test func theEndOfStreamComesAfterTheLastPDUs() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        try await a.send(burst: [Self.pdu(1), Self.pdu(2), Self.pdu(3)])
        await a.close()
        #expect(try await Self.collect(b, count: 3, upTo: 32) == [Self.pdu(1), Self.pdu(2), Self.pdu(3)])
        await #expect(throws: BearerError(.disconnected)) { _ = try await b.receive(upTo: 32) }
    }

    @Test func aBurstReceiveSuspendsUntilSomethingArrives() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        let receiver = Task { try await b.receive(upTo: 16) }
        let fd = try #require(b.socket)
        var spins = 0
        while Reactor.shared.pendingWaitCount(on: fd.rawValue) < 1 && spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
        #expect(Reactor.shared.pendingWaitCount(on: fd.rawValue) == 1, "the receive never suspended")
        try await a.send(burst: [Self.pdu(7)])
        #expect(try await receiver.value == [Self.pdu(7)])
    }

    @Test func anOversizedPDUInABurstSendsNothing() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair(linkInfo: LinkInfo(maximumPDUSize: 23))
        await #expect(throws: BearerError(.pduTooLarge)) {
            try await a.send(burst: [[0x52, 0x01, 0x00], [UInt8](repeating: 0x52, count: 24)])
        }
        try await a.send([0x52, 0x02, 0x00])
        #expect(try await b.receive() == [0x52, 0x02, 0x00])
    }

    /// `send(burst:prefix:)` (issue 18 point 3): each message is the prefix and its payload, put together in the
    /// bearer's reused sendmmsg buffer; the peer sees exactly the PDUs `send(burst:)` of the joined arrays sends,
    /// over several sendmmsg calls (more than 64), with a buffer that has to grow (payloads up to 600 bytes), and a
    /// second burst reusing it.
    @Test func aPrefixedBurstArrivesAsTheJoinedPDUs() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        let image = (0..<60_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        var payloads: [ArraySlice<UInt8>] = []
        var offset = 0
        for index in 0..<100 {
            let length = index == 50 ? 600 : 1 + index % 244
            payloads.append(image[offset..<offset + length])
            offset += length
        }
        let prefix: [UInt8] = [0x52, 0x10, 0x00]
        try await a.send(burst: payloads, prefix: prefix)
        #expect(try await Self.collect(b, count: 100, upTo: 64) == payloads.map { prefix + $0 })
        let again = Array(payloads.suffix(3))
        try await a.send(burst: again, prefix: [0x52, 0x11, 0x00])
        #expect(try await Self.collect(b, count: 3, upTo: 8) == again.map { [0x52, 0x11, 0x00] + $0 })
    }

    @Test func aPrefixedBurstLargerThanTheSendBufferWaitsForTheReceiver() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair()
        try #require(a.socket).setSendBufferSize(4096)
        let image = [UInt8](repeating: 0xEE, count: 244 * 300)
        let payloads = (0..<300).map { image[($0 * 244)..<($0 * 244 + 244)] }
        let sender = Task { try await a.send(burst: payloads, prefix: [0x52, 0x10, 0x00]) }
        let received = try await Self.collect(b, count: 300, upTo: 32)
        try await sender.value
        #expect(received == payloads.map { [0x52, 0x10, 0x00] + $0 })
    }

    @Test func anOversizedPrefixedPDUSendsNothing() async throws {
        let (a, b) = try SeqPacketBearer.makeSocketPair(linkInfo: LinkInfo(maximumPDUSize: 23))
        let payloads: [ArraySlice<UInt8>] = [[0x01][...], [UInt8](repeating: 0x02, count: 21)[...]]
        await #expect(throws: BearerError(.pduTooLarge)) { try await a.send(burst: payloads, prefix: [0x52, 0x01, 0x00]) }
        try await a.send(burst: [payloads[0]], prefix: [0x52, 0x01, 0x00])
        #expect(try await b.receive() == [0x52, 0x01, 0x00, 0x01])
    }

    @Test func capturesSeeEveryPDUOfABurst() async throws {
        let (a, b) = try SeqPacketBearer.makePair()
        let recorder = BurstRecorder()
        let capturingA = CapturingBearer(wrapping: a, observers: [recorder])
        let capturingB = CapturingBearer(wrapping: b, observers: [recorder])
        try await capturingA.send(burst: [Self.pdu(1), Self.pdu(2)])
        _ = try await Self.collect(capturingB, count: 2, upTo: 8)
        #expect(recorder.pdus(sent: true) == [Self.pdu(1), Self.pdu(2)])
        #expect(recorder.pdus(sent: false) == [Self.pdu(1), Self.pdu(2)])
    }
}

/// Every PDU a capturing bearer showed, in order.
final class BurstRecorder: PDUObserver {
    private let seen = Mutex<[(pdu: [UInt8], sent: Bool)]>([])
    func observe(pdu: [UInt8], sent: Bool) { seen.withLock { $0.append((pdu, sent)) } }
    func pdus(sent: Bool) -> [[UInt8]] { seen.withLock { $0.filter { $0.sent == sent }.map(\.pdu) } }
}
