#if ENABLE_MOCKING
import BLECore
import LinuxIO
import SystemPackage
import Testing

/// sendmmsg(2) / recvmmsg(2) at the syscall boundary: EINTR retried, EAGAIN a value, partial sends resumed.
@Suite(.timeLimit(.minutes(5))) struct SocketBurstSyscallTests {
    let fakeFD = SocketDescriptor(rawValue: 9998)
    let burst: [[UInt8]] = [[0x52, 0x10, 0x00, 0x01], [0x52, 0x10, 0x00, 0x02, 0x02], [0x52, 0x10, 0x00, 0x03]]

    @Test func sendmmsgRetriesEINTRAndReportsHowManyWereTaken() throws {
        let mock = SyscallMock(script: [.fails("sendmmsg", .interrupted), .returns("sendmmsg", 2)])
        let result = try mock.run { () throws(Errno) in try fakeFD.send(messages: burst[...]) }
        guard case .processed(let sent) = result else {
            Issue.record("expected .processed, got \(result)")
            return
        }
        #expect(sent == 2)
        #expect(mock.callNames == ["sendmmsg", "sendmmsg"])
        // Arguments: fd, message count, flags (MSG_NOSIGNAL); the input is the first message.
        #expect(mock.calls.last?.arguments.prefix(2) == [9998, 3])
        #expect(mock.calls.last?.input == burst[0])
        #expect(mock.violations.isEmpty)
    }

    @Test func sendmmsgEAGAINIsAValueAndOtherErrorsThrow() throws {
        let mock = SyscallMock(script: [.fails("sendmmsg", .wouldBlock), .fails("sendmmsg", .brokenPipe)])
        let first = try mock.run { () throws(Errno) in try fakeFD.send(messages: burst[...]) }
        guard case .wouldBlock = first else {
            Issue.record("expected .wouldBlock, got \(first)")
            return
        }
        #expect(throws: Errno.brokenPipe) { try mock.run { () throws(Errno) in _ = try fakeFD.send(messages: burst[...]) } }
    }

    @Test func recvmmsgRetriesEINTRAndEAGAINIsAValue() throws {
        let batch = ReceiveBatch(capacity: 4, slotSize: 64)
        let mock = SyscallMock(script: [
            .fails("recvmmsg", .wouldBlock), .fails("recvmmsg", .interrupted), .bytes("recvmmsg", [0x1B, 0x0E, 0x00, 0x60]),
        ])
        let first = try mock.run { () throws(Errno) in try fakeFD.receive(upTo: 4, using: batch) }
        let second = try mock.run { () throws(Errno) in try fakeFD.receive(upTo: 4, using: batch) }
        guard case .wouldBlock = first, case .processed(let messages) = second else {
            Issue.record("got \(first), \(second)")
            return
        }
        #expect(messages == [[0x1B, 0x0E, 0x00, 0x60]])
        #expect(mock.callNames == ["recvmmsg", "recvmmsg", "recvmmsg"])
        #expect(mock.calls.first?.arguments.prefix(2) == [9998, 4])
    }

    /// A partial sendmmsg (the kernel took one PDU), then EAGAIN: the bearer waits for writability and sends the
    /// rest, starting at the second PDU.
    @Test func theBearerResumesAPartialBurst() async throws {
        let bearer = SyscallMock(script: [.returns("fcntl", 0), .returns("fcntl", 0), .returns("fcntl", 0)]).run {
            SocketBearer(descriptor: fakeFD)
        }
        let mock = SyscallMock(script: [
            .returns("sendmmsg", 1), .fails("sendmmsg", .wouldBlock), .returns("sendmmsg", 2),
            .returns("shutdown"), .returns("close"),
        ])
        try await mock.run { () async throws(BearerError) in try await bearer.send(burst: burst) }
        mock.run { bearer.closeNow() }
        #expect(mock.callNames == ["sendmmsg", "sendmmsg", "waitWritable", "sendmmsg", "shutdown", "close"])
        #expect(mock.calls.map(\.input).prefix(4) == [burst[0], burst[1], nil, burst[1]])
        #expect(mock.violations.isEmpty)
    }

    /// recvmmsg through the bearer: EAGAIN waits for readability; an empty message is the end of the stream.
    @Test func theBearerBurstReceiveWaitsAndSeesTheEnd() async throws {
        let bearer = SyscallMock(script: [.returns("fcntl", 0), .returns("fcntl", 0), .returns("fcntl", 0)]).run {
            SocketBearer(descriptor: fakeFD)
        }
        let mock = SyscallMock(script: [
            .fails("recvmmsg", .wouldBlock), .bytes("recvmmsg", [0x13]), .returns("recvmmsg", 0),
            .returns("shutdown"), .returns("close"),
        ])
        let pdus = try await mock.run { () async throws(BearerError) in try await bearer.receive(upTo: 8) }
        #expect(pdus == [[0x13]])
        await #expect(throws: BearerError(.disconnected)) {
            try await mock.run { () async throws(BearerError) in _ = try await bearer.receive(upTo: 8) }
        }
        mock.run { bearer.closeNow() }
        #expect(mock.callNames == ["recvmmsg", "waitReadable", "recvmmsg", "recvmmsg", "shutdown", "close"])
        #expect(mock.violations.isEmpty)
    }
}
#endif
