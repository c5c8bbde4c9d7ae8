import BLECore
import BlueZTransport
import Glibc
import LinuxIO
import Testing
import VirtualRadio

/// The device's end of a BlueZ link reads ahead (vm-test "legacy" lost 157 of 512 Write Commands to the kernel).
///
/// The ATT fixed channel, like UDP, is a message socket whose kernel frees a message that does not fit the receive
/// buffer (`l2cap_sock_recv_cb`): these tests use a real UDP pair on the loopback with the smallest receive buffer
/// as that socket (no Bluetooth here), and SOCK_SEQPACKET pairs for the end of the link.
@Suite(.timeLimit(.minutes(5))) struct ReadAheadBearerTests {
    /// A datagram socket bound to 127.0.0.1 (an ephemeral port) with the smallest receive buffer, and a sender
    /// connected to it.
    func droppingPair() throws -> (receiver: SocketDescriptor, sender: SocketDescriptor) {
        let receiver = try SocketDescriptor.open(domain: AF_INET, type: CInt(SOCK_DGRAM.rawValue))
        try receiver.setOption(level: SOL_SOCKET, name: SO_RCVBUF, value: 1)  // the kernel's minimum (SOCK_MIN_RCVBUF)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        try withUnsafeBytes(of: &address) { try receiver.bind(address: $0) }
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(receiver.rawValue, $0, &length) }
        }
        #expect(named == 0)
        let sender = try SocketDescriptor.open(domain: AF_INET, type: CInt(SOCK_DGRAM.rawValue))
        let connected = try withUnsafeBytes(of: &bound) { try sender.connect(address: $0) }
        if case .wouldBlock = connected { Issue.record("connect on a datagram socket would block") }
        return (receiver, sender)
    }

    /// A Legacy data packet as the flash sends it: Write Command (0x52) to handle 0x000E, 20 bytes counting `n`.
    func packet(_ n: Int) -> [UInt8] {
        [0x52, 0x0E, 0x00] + (0..<20).map { UInt8(truncatingIfNeeded: n &+ $0) }
    }

    /// Yields until `bearer` holds `count` PDUs (bounded; no sleeping).
    func waitUntilHeld(_ bearer: ReadAheadBearer, _ count: Int) async {
        var spins = 0
        while bearer.heldCount < count && spins < 2_000_000 {
            spins += 1
            await Task.yield()
        }
    }

    /// The premise: a message socket that is not read loses what its buffer cannot hold, silently.
    @Test func aSocketThatIsNotReadLosesMessages() async throws {
        let (receiver, sender) = try droppingPair()
        defer {
            try? receiver.close()
            try? sender.close()
        }
        for n in 0..<512 { _ = try sender.send(packet(n)) }
        var arrived = 0
        while case .processed(let bytes) = try receiver.receive(maximumCount: 64), !bytes.isEmpty { arrived += 1 }
        #expect(arrived > 0)
        #expect(arrived < 512, "the kernel kept all 512 datagrams: the premise of these tests does not hold here")
    }

    /// The device does not read while 512 packets arrive (it is busy modelling air time): the read-ahead takes each
    /// out of the kernel as it comes, and the device later gets all of them, in order.
    @Test func everyPacketIsKeptInOrderWhileTheDeviceIsBusy() async throws {
        let (receiver, sender) = try droppingPair()
        defer { try? sender.close() }
        let bearer = ReadAheadBearer(SocketBearer(descriptor: receiver))
        for n in 0..<512 {
            _ = try sender.send(packet(n))
            await waitUntilHeld(bearer, n + 1)
        }
        #expect(bearer.heldCount == 512)
        var received: [[UInt8]] = []
        while received.count < 512 { received += try await bearer.receive(upTo: 100) }
        #expect(received == (0..<512).map(packet))
        #expect(bearer.heldCount == 0)
        await bearer.close()
    }

    /// The central sends three PDUs and drops the link: the device gets the three, then `.disconnected`.
    @Test func theLinksEndComesAfterTheHeldPDUs() async throws {
        let (central, device) = try SeqPacketBearer.makeSocketPair()
        let bearer = ReadAheadBearer(device)
        try await central.send([0x12, 0x0B, 0x00, 0x01, 0x00])  // Write Request, handle 0x000B (CCCD): notify
        try await central.send(packet(0))
        try await central.send([0x12, 0x0D, 0x00, 0x07])  // Write Request, Control Point: 07 Report Received Image Size
        await central.close()
        #expect(try await bearer.receive() == [0x12, 0x0B, 0x00, 0x01, 0x00])
        #expect(try await bearer.receive(upTo: 8) == [packet(0), [0x12, 0x0D, 0x00, 0x07]])
        await #expect(throws: BearerError.self) { try await bearer.receive() }
        do {
            _ = try await bearer.receive()
            Issue.record("a receive after the end returned")
        } catch {
            #expect(error.code == .disconnected)
        }
        await bearer.close()
    }

    /// The device closes: a waiting receive ends with `.closed`; the device's answers went out before.
    @Test func closingEndsAWaitingReceive() async throws {
        let (central, device) = try SeqPacketBearer.makeSocketPair()
        let bearer = ReadAheadBearer(device)
        try await bearer.send([0x13])  // Write Response
        #expect(try await central.receive() == [0x13])
        async let waiting: Result<[UInt8], BearerError> = {
            do throws(BearerError) { return .success(try await bearer.receive()) } catch { return .failure(error) }
        }()
        await bearer.close()
        switch await waiting {
        case .success(let pdu): Issue.record("received \(pdu) after close")
        case .failure(let error): #expect(error.code == .closed)
        }
        await central.close()
    }

    /// Holding is bounded: beyond the capacity nothing more is taken from the link until the device reads.
    @Test func readingPausesAtTheCapacity() async throws {
        let (central, device) = try SeqPacketBearer.makeSocketPair()
        let bearer = ReadAheadBearer(device, capacity: 4)
        for n in 0..<10 { try await central.send(packet(n)) }
        await waitUntilHeld(bearer, 4)
        #expect(bearer.heldCount == 4)
        var received: [[UInt8]] = []
        while received.count < 10 { received += try await bearer.receive(upTo: 3) }
        #expect(received == (0..<10).map(packet))
        await bearer.close()
        await central.close()
    }
}
