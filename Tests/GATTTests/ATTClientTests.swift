import ATT
import BLECore
import TestDoubles
import Testing

@testable import GATT

/// ATT bearer rules of `ATTClient`, as conversation scripts: the test plays the peer on the other end of an
/// in-memory pair and time runs on a manual clock.
@Suite(.timeLimit(.minutes(3))) struct ATTClientTests {
    let clock = ManualClock()
    let client: ATTClient
    let peer: InMemoryBearer

    init() {
        let (clientEnd, peerEnd) = InMemoryBearer.makePair()
        client = ATTClient(bearer: clientEnd, clock: clock)
        peer = peerEnd
    }

    /// Waits (without sleeping) until the client holds `count` queued requests behind the outstanding one.
    private func waitForQueued(_ count: Int) async {
        for _ in 0..<10_000 where await client.queuedRequestCount < count {
            await Task.yield()
        }
    }

    @Test func exchangeMTUTakesTheSmallerValue() async throws {
        async let mtu = client.exchangeMTU()
        // Exchange MTU Request, Client Rx MTU 517 (0x0205).
        #expect(try await peer.receive() == bytes("02 05 02"))
        // Exchange MTU Response, Server Rx MTU 247.
        try await peer.send(bytes("03 F7 00"))
        #expect(try await mtu == 247)
        #expect(await client.mtu == 247)
    }

    @Test func exchangeMTUNeverGoesBelow23() async throws {
        async let mtu = client.exchangeMTU(100)
        #expect(try await peer.receive() == bytes("02 64 00"))
        try await peer.send(bytes("03 10 00"))  // Server Rx MTU 16: invalid, the MTU stays 23.
        #expect(try await mtu == 23)
    }

    @Test func oneOutstandingRequestOthersQueueInOrder() async throws {
        let first = Task { try await client.request(.readRequest(handle: 3)) }
        #expect(try await peer.receive() == bytes("0A 03 00"))
        let second = Task { try await client.request(.readRequest(handle: 5)) }
        await waitForQueued(1)
        #expect(await client.queuedRequestCount == 1)
        try await peer.send(bytes("0B AA"))  // Read Response to the first.
        #expect(try await peer.receive() == bytes("0A 05 00"))  // only now the second goes out.
        try await peer.send(bytes("0B BB"))
        #expect(try await first.value == .readResponse(value: [0xAA]))
        #expect(try await second.value == .readResponse(value: [0xBB]))
    }

    @Test func stateMachineQueuesTheSecondRequest() {
        var machine = ATTClientStateMachine(rxMTU: 517)
        #expect(machine.request(.readRequest(handle: 1), id: 1) == [.send(bytes("0A 01 00")), .startTimer(1)])
        #expect(machine.request(.readRequest(handle: 2), id: 2) == [])
        #expect(
            machine.received(bytes("0B 01")) == [
                .cancelTimer, .complete(1, .success(.readResponse(value: [1]))), .send(bytes("0A 02 00")),
                .startTimer(2),
            ])
    }

    @Test func commandsDoNotWaitForTheOutstandingRequest() async throws {
        let read = Task { try await client.request(.readRequest(handle: 3)) }
        #expect(try await peer.receive() == bytes("0A 03 00"))
        // The read is still unanswered; the Write Command goes out anyway.
        try await client.command(.writeCommand(handle: 0x0E, value: [0x01, 0x02]))
        #expect(try await peer.receive() == bytes("52 0E 00 01 02"))
        try await peer.send(bytes("0B"))
        #expect(try await read.value == .readResponse(value: []))
    }

    @Test func transactionTimeoutClosesTheBearerAndFailsEveryWaiter() async throws {
        let first = attempt(client, .readRequest(handle: 3))
        #expect(try await peer.receive() == bytes("0A 03 00"))
        let second = attempt(client, .readRequest(handle: 5))
        await waitForQueued(1)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(29))
        #expect(await client.closeReason == nil)
        clock.advance(by: .seconds(1))
        #expect(await first.value.error?.code == .timeout)
        #expect(await second.value.error?.code == .timeout)
        #expect(await client.disconnected().code == .timeout)
        // The bearer is closed: the peer sees a disconnect, and new requests fail at once.
        await #expect(throws: BearerError(.disconnected)) { try await peer.receive() }
        await #expect(throws: ATTClientError(.timeout)) { try await client.request(.readRequest(handle: 1)) }
    }

    @Test func indicationIsDeliveredThenConfirmed() async throws {
        var notifications = client.notifications.makeAsyncIterator()
        try await peer.send(bytes("1B 0B 00 60 01 01"))  // Handle Value Notification, handle 0x000B.
        try await peer.send(bytes("1D 0B 00 60 03 01"))  // Handle Value Indication, handle 0x000B.
        #expect(await notifications.next() == ATTNotification(handle: 0x0B, value: [0x60, 0x01, 0x01], isIndication: false))
        #expect(await notifications.next() == ATTNotification(handle: 0x0B, value: [0x60, 0x03, 0x01], isIndication: true))
        // Only the indication is confirmed.
        #expect(try await peer.receive() == bytes("1E"))
    }

    @Test func peerExchangeMTURequestIsAnswered() async throws {
        try await peer.send(bytes("02 F7 00"))  // the peer's Exchange MTU Request, Client Rx MTU 247
        #expect(try await peer.receive() == bytes("03 05 02"))  // our Rx MTU 517
        #expect(await client.mtu == 247)
    }

    @Test func peerRequestsGetRequestNotSupportedAndCommandsAreIgnored() async throws {
        try await peer.send(bytes("52 03 00 01"))  // Write Command: ignored.
        try await peer.send(bytes("0A 03 00"))  // Read Request, handle 3.
        // Error Response: request 0x0A, handle 0x0000, Request Not Supported (0x06).
        #expect(try await peer.receive() == bytes("01 0A 00 00 06"))
        try await peer.send(bytes("10 01 00 FF FF 00 28"))
        #expect(try await peer.receive() == bytes("01 10 00 00 06"))
        #expect(await client.closeReason == nil)
    }

    @Test func errorResponseBecomesRemoteError() async throws {
        let read = attempt(client, .readRequest(handle: 3))
        #expect(try await peer.receive() == bytes("0A 03 00"))
        try await peer.send(bytes("01 0A 03 00 02"))  // Read Not Permitted on handle 3.
        let error = await read.value.error
        #expect(error == .remote(.readNotPermitted, .readRequest, 3))
        #expect(error?.handle == 3)
        #expect(error?.requestOpcode == .readRequest)
        #expect(await client.closeReason == nil)
    }

    @Test func responseWithoutRequestIsAProtocolViolation() async throws {
        try await peer.send(bytes("0B 01 02"))
        #expect(await client.disconnected().code == .protocolViolation)
        await #expect(throws: BearerError(.disconnected)) { try await peer.receive() }
    }

    @Test func wrongResponseOpcodeIsAProtocolViolation() async throws {
        let read = attempt(client, .readRequest(handle: 3))
        #expect(try await peer.receive() == bytes("0A 03 00"))
        try await peer.send(bytes("13"))  // Write Response to a Read Request.
        #expect(await read.value.error?.code == .protocolViolation)
        await #expect(throws: BearerError(.disconnected)) { try await peer.receive() }
    }

    @Test func undecodablePDUClosesTheBearer() async throws {
        try await peer.send(bytes("03 01"))  // Exchange MTU Response cut short.
        #expect(await client.disconnected().code == .decoding)
    }

    @Test func peerDisconnectFailsTheOutstandingRequest() async throws {
        let read = attempt(client, .readRequest(handle: 3))
        #expect(try await peer.receive() == bytes("0A 03 00"))
        await peer.close()
        #expect(await read.value.error?.code == .disconnected)
        #expect(await client.disconnected().code == .disconnected)
    }

    @Test func requestRejectsCommands() async throws {
        await #expect(throws: ATTClientError(.invalidArgument)) {
            try await client.request(.writeCommand(handle: 1, value: []))
        }
    }
}

/// Runs `body` in a task, keeping its typed error.
/// Sends `pdu` as a request from a task, keeping the typed error.
func attempt(_ client: ATTClient, _ pdu: ATTPDU) -> Task<Result<ATTPDU, ATTClientError>, Never> {
    Task {
        do throws(ATTClientError) { return .success(try await client.request(pdu)) } catch { return .failure(error) }
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
