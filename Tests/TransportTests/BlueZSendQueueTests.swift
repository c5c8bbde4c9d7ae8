#if ENABLE_MOCKING
import BLECore
import BlueZTransport
import LinuxIO
import Synchronization
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Waiting for an L2CAP socket's send queue before HCI Disconnect, at the syscall boundary (LinuxIO's
/// SyscallMock). The kernel answers TIOCOUTQ on Bluetooth sockets with the free space of the send buffer, so
/// "drained" is an answer equal to SO_SNDBUF.
@Suite(.timeLimit(.minutes(5))) struct BlueZSendQueueTests {
    static let socket = SocketDescriptor(rawValue: 7001)
    static let sendBuffer = 16_384

    /// A little-endian CInt, as getsockopt and ioctl fill it in.
    static func int(_ value: Int) -> [UInt8] { withUnsafeBytes(of: CInt(value).littleEndian) { Array($0) } }

    @Test func pollsUntilTheSendBufferIsFreeAgain() async {
        let clock = SteppingClock()
        let mock = SyscallMock(script: [
            .bytes("getsockopt", Self.int(Self.sendBuffer)),
            .bytes("ioctl", Self.int(Self.sendBuffer - 1_280)),  // two PDUs still allocated
            .bytes("ioctl", Self.int(Self.sendBuffer - 640)),
            .bytes("ioctl", Self.int(Self.sendBuffer)),  // handed to the controller
        ])
        let outcome = await mock.run { () async -> L2CAPSendQueue.Outcome in
            await L2CAPSendQueue.waitUntilDrained(Self.socket, timeout: .seconds(1), clock: clock)
        }
        #expect(outcome == .drained(polls: 3))
        #expect(mock.violations.isEmpty)
        // getsockopt(fd, SOL_SOCKET, SO_SNDBUF); ioctl(fd, TIOCOUTQ)
        #expect(mock.calls.first?.arguments == [7001, Int(SOL_SOCKET), Int(SO_SNDBUF)])
        #expect(mock.calls.filter { $0.name == "ioctl" }.map(\.arguments) == Array(repeating: [7001, 0x5411], count: 3))
        #expect(clock.sleeps == [.milliseconds(5), .milliseconds(5)])  // between the queries, none after the last
    }

    @Test func anEmptyQueueNeedsNoWait() async {
        let clock = SteppingClock()
        let mock = SyscallMock(script: [
            .bytes("getsockopt", Self.int(Self.sendBuffer)), .bytes("ioctl", Self.int(Self.sendBuffer)),
        ])
        let outcome = await mock.run { () async -> L2CAPSendQueue.Outcome in
            await L2CAPSendQueue.waitUntilDrained(Self.socket, timeout: .seconds(1), clock: clock)
        }
        #expect(outcome == .drained(polls: 1))
        #expect(clock.sleeps.isEmpty)
    }

    @Test func givesUpAtTheTimeoutWithWhatIsStillQueued() async {
        let clock = SteppingClock()
        // 50 ms at 5 ms per query: queries at t = 0, 5, ..., 50 ms, the last one past nothing.
        let stuck = Array(repeating: SyscallMock.Step.bytes("ioctl", Self.int(Self.sendBuffer - 320)), count: 11)
        let mock = SyscallMock(script: [.bytes("getsockopt", Self.int(Self.sendBuffer))] + stuck)
        let outcome = await mock.run { () async -> L2CAPSendQueue.Outcome in
            await L2CAPSendQueue.waitUntilDrained(Self.socket, timeout: .milliseconds(50), clock: clock)
        }
        #expect(outcome == .timedOut(queuedBytes: 320))
        #expect(mock.violations.isEmpty)
        #expect(mock.remainingSteps.isEmpty)
        #expect(clock.elapsed == .milliseconds(50))
    }

    @Test func aFailedQueryEndsTheWait() async {
        let clock = SteppingClock()
        let mock = SyscallMock(script: [
            .bytes("getsockopt", Self.int(Self.sendBuffer)), .fails("ioctl", .badFileDescriptor),
        ])
        let outcome = await mock.run { () async -> L2CAPSendQueue.Outcome in
            await L2CAPSendQueue.waitUntilDrained(Self.socket, timeout: .seconds(1), clock: clock)
        }
        #expect(outcome == .failed(.badFileDescriptor))
        #expect(clock.sleeps.isEmpty)
        let noOption = SyscallMock(script: [.fails("getsockopt", .notSocket)])
        let early = await noOption.run { () async -> L2CAPSendQueue.Outcome in
            await L2CAPSendQueue.waitUntilDrained(Self.socket, timeout: .seconds(1), clock: clock)
        }
        #expect(early == .failed(.notSocket))
        #expect(noOption.callNames == ["getsockopt"])
    }

    /// The peripheral keeps a second descriptor of an accepted link; `disconnect` waits on it, closes it, and only
    /// then sends HCI Disconnect.
    @Test func disconnectWaitsForTheAcceptedSocketsQueueFirst() async throws {
        let adapter = BlueZAdapterInfo(id: 1, name: "hci1", address: BluetoothAddress("00:AA:01:01:00:01"), isUp: true)
        let mock = SyscallMock(script: [
            .returns("socket", 9001), .returns("bind", 0), .returns("listen", 0),  // the ATT listener
            .returns("socket", 9002), .returns("bind", 0), .returns("setsockopt", 0),  // the HCI channel
            .returns("accept", 7001),
            .bytes("getsockopt", [0x41, 0x00, 0, 0, 0, 0]),  // L2CAP_CONNINFO: handle 0x0041
            .returns("fcntl", 7002),  // F_DUPFD_CLOEXEC: the second descriptor
            .returns("fcntl", 2), .returns("fcntl", 0), .returns("fcntl", 0),  // SocketBearer: O_NONBLOCK, FD_CLOEXEC
            .returns("shutdown", 0), .returns("close", 0),  // the device ends the link: the bearer closes
            .bytes("getsockopt", Self.int(Self.sendBuffer)), .bytes("ioctl", Self.int(Self.sendBuffer)),
            .returns("close", 0),  // the second descriptor
            // HCI Disconnect: Command Status, then Disconnection Complete (handle 0x0041, reason 0x16).
            .returns("send", 7), .bytes("recv", [0x04, 0x0F, 0x04, 0x00, 0x01, 0x06, 0x04]),
            .bytes("recv", [0x04, 0x05, 0x04, 0x00, 0x41, 0x00, 0x16]),
        ])
        let confirmed = try await mock.run { () async throws -> Bool in
            let peripheral = try BlueZPeripheral(adapter: adapter)
            let bearer = try await peripheral.accept(drainingBeforeDisconnect: true)
            await bearer.close()
            return await peripheral.disconnect(handle: 0x41)
        }
        #expect(confirmed)
        #expect(mock.violations.isEmpty)
        #expect(mock.remainingSteps.isEmpty)
        #expect(mock.calls.first { $0.name == "fcntl" }?.arguments == [7001, Int(F_DUPFD_CLOEXEC), 0])
        #expect(mock.calls.first { $0.name == "ioctl" }?.arguments == [7002, 0x5411])
        #expect(mock.calls.filter { $0.name == "close" }.map(\.arguments) == [[7001], [7002]])
        // The order that matters: the queue query and the close of the second descriptor come before HCI Disconnect.
        let names = mock.callNames
        #expect(names.lastIndex(of: "ioctl").map { $0 < (names.firstIndex(of: "send") ?? 0) } == true)
    }
}

/// A clock whose sleeps return at once and move its time forward by what was asked (no real waiting), recording them.
final class SteppingClock: Clock, Sendable {
    struct Instant: InstantProtocol, Hashable, Sendable {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let state = Mutex<(now: Duration, sleeps: [Duration])>((.zero, []))
    var now: Instant { Instant(offset: state.withLock { $0.now }) }
    var minimumResolution: Duration { .zero }
    var sleeps: [Duration] { state.withLock { $0.sleeps } }
    var elapsed: Duration { state.withLock { $0.now } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try Task.checkCancellation()
        state.withLock { state in
            state.sleeps.append(deadline.offset - state.now)
            state.now = max(state.now, deadline.offset)
        }
    }
}
#endif
