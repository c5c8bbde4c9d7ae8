#if ENABLE_MOCKING
import BLECore
import LinuxIO
import SystemPackage
import Testing

/// The syscall policy (EINTR retried, EAGAIN as a value) and the socket bearer at the syscall boundary.
@Suite(.timeLimit(.minutes(5))) struct LinuxIOSyscallMockTests {
    /// A descriptor number no real socket uses in these tests: every call on it is scripted.
    let fakeFD = SocketDescriptor(rawValue: 9999)

    @Test func eintrIsRetried() throws {
        let mock = SyscallMock(script: [.fails("send", .interrupted), .fails("send", .interrupted), .returns("send", 3)])
        let result = try mock.run { () throws(Errno) -> IOResult<Int> in try fakeFD.send([1, 2, 3]) }
        guard case .processed(let count) = result else {
            Issue.record("expected .processed, got \(result)")
            return
        }
        #expect(count == 3)
        #expect(mock.callNames == ["send", "send", "send"])
        #expect(mock.calls.last?.input == [1, 2, 3])
        #expect(mock.violations.isEmpty)
    }

    @Test func eintrNotRetriedWhenAsked() {
        let mock = SyscallMock(script: [.fails("close", .interrupted)])
        let result = mock.run { valueOrErrno(retryOnInterrupt: false) { system_close(9999) } }
        #expect(result == .failure(.interrupted))
        #expect(mock.remainingSteps.isEmpty)
    }

    @Test func eagainIsAValue() throws {
        let mock = SyscallMock(script: [.fails("recv", .wouldBlock), .bytes("recv", [0x0A, 0x03, 0x00])])
        let first = try mock.run { () throws(Errno) in try fakeFD.receive(maximumCount: 64) }
        let second = try mock.run { () throws(Errno) in try fakeFD.receive(maximumCount: 64) }
        guard case .wouldBlock = first, case .processed(let bytes) = second else {
            Issue.record("got \(first), \(second)")
            return
        }
        #expect(bytes == [0x0A, 0x03, 0x00])
    }

    @Test func otherErrnoIsThrown() {
        let mock = SyscallMock(script: [.fails("send", .connectionReset)])
        #expect(throws: Errno.connectionReset) {
            try mock.run { () throws(Errno) in _ = try fakeFD.send([1]) }
        }
    }

    @Test func scriptMismatchIsReported() {
        let mock = SyscallMock(script: [.returns("recv", 0)])
        let result = mock.run { valueOrErrno { system_listen(9999, 1) } }
        #expect(result == .failure(.noFunction))
        #expect(mock.violations == ["expected recv, got listen"])
    }

    @Test func bearerRetriesSendAfterWouldBlock() async throws {
        let initMock = SyscallMock(script: [.returns("fcntl", 0), .returns("fcntl", 0), .returns("fcntl", 0)])
        let bearer = initMock.run { SocketBearer(descriptor: fakeFD) }
        #expect(initMock.callNames == ["fcntl", "fcntl", "fcntl"])  // F_GETFL, F_SETFL O_NONBLOCK, F_SETFD
        let sendMock = SyscallMock(script: [.fails("send", .wouldBlock), .returns("send", 3)])
        try await sendMock.run { () async throws(BearerError) in try await bearer.send([0x52, 0x05, 0x00]) }
        #expect(sendMock.callNames == ["send", "waitWritable", "send"])
        #expect(sendMock.violations.isEmpty)
        // Closing a descriptor number we do not own must not reach the kernel.
        let closeMock = SyscallMock(script: [.returns("shutdown"), .returns("close")])
        closeMock.run { bearer.closeNow() }
        #expect(closeMock.callNames == ["shutdown", "close"])
    }

    @Test func bearerReceiveMapsEndOfStreamAndReset() async throws {
        let bearer = SyscallMock(script: [], passthroughWhenExhausted: false).run { SocketBearer(descriptor: fakeFD) }
        let mock = SyscallMock(script: [
            .fails("recv", .wouldBlock), .bytes("recv", [0x1B, 0x05, 0x00, 0xAA]),
            .returns("recv", 0),
            .fails("recv", .connectionReset),
            .returns("shutdown"), .returns("close"),
        ])
        let pdu = try await mock.run { () async throws(BearerError) in try await bearer.receive() }
        #expect(pdu == [0x1B, 0x05, 0x00, 0xAA])
        await #expect(throws: BearerError(.disconnected)) {
            try await mock.run { () async throws(BearerError) in _ = try await bearer.receive() }
        }
        await #expect(throws: BearerError(.disconnected)) {
            try await mock.run { () async throws(BearerError) in _ = try await bearer.receive() }
        }
        mock.run { bearer.closeNow() }
        #expect(mock.callNames == ["recv", "waitReadable", "recv", "recv", "recv", "shutdown", "close"])
        #expect(mock.violations.isEmpty)
        await #expect(throws: BearerError(.closed)) { _ = try await bearer.receive() }
    }
}
#endif
