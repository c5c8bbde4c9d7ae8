import ATT
import BLECore
import TestDoubles
import Testing

@testable import GATT

/// `ATTClient.commands(encoded:)` (a burst of Write Commands in one bearer call) and
/// `ATTClient.notificationValues(handle:)` (notifications of one handle without a forwarding task), as conversation
/// scripts against the peer end of an in-memory pair.
@Suite(.timeLimit(.minutes(3))) struct ATTClientBurstTests {
    let clock = ManualClock()
    let client: ATTClient
    let peer: InMemoryBearer

    init() {
        let (clientEnd, peerEnd) = InMemoryBearer.makePair(capacity: 64)
        client = ATTClient(bearer: clientEnd, clock: clock)
        peer = peerEnd
    }

    @Test func aBurstGoesOutInOrderAfterAQueuedRequest() async throws {
        // Write Request (0x12) to handle 0x000B, value 03; it stays outstanding while the burst goes out.
        async let written: ATTPDU = client.request(.writeRequest(handle: 0x0B, value: [0x03]))
        #expect(try await peer.receive() == bytes("12 0B 00 03"))
        let burst = [bytes("52 0E 00 01 02"), bytes("52 0E 00 03"), bytes("52 0E 00")]
        try await client.commands(encoded: burst)  // commands never wait for the outstanding request
        for pdu in burst { #expect(try await peer.receive() == pdu) }
        try await peer.send(bytes("13"))  // Write Response
        #expect(try await written == .writeResponse)
    }

    @Test func aBurstIsRefusedWholeWhenOnePDUIsNoCommandOrTooLong() async throws {
        // ATT_MTU 23 (no exchange): 24 octets are one too many. Read Request (0x0A) is not a command.
        await #expect(throws: ATTClientError(.invalidArgument)) {
            try await client.commands(encoded: [bytes("52 0E 00 01"), [0x52] + [UInt8](repeating: 0, count: 23)])
        }
        await #expect(throws: ATTClientError(.invalidArgument)) {
            try await client.commands(encoded: [bytes("52 0E 00 01"), bytes("0A 03 00")])
        }
        await #expect(throws: ATTClientError(.invalidArgument)) { try await client.commands(encoded: [[]]) }
        // Nothing of the refused bursts went out: the next PDU the peer sees is this one.
        try await client.commands(encoded: [bytes("52 0E 00 09")])
        #expect(try await peer.receive() == bytes("52 0E 00 09"))
    }

    @Test func aRoutedHandleGetsItsOwnStream() async throws {
        let routed = client.notificationValues(handle: 0x0B)
        var values = routed.makeAsyncIterator()
        var others = client.notifications.makeAsyncIterator()
        try await peer.send(bytes("1B 0B 00 60 01 01"))  // notification, handle 0x000B: routed
        try await peer.send(bytes("1B 0C 00 AA"))  // notification, handle 0x000C: the general stream
        try await peer.send(bytes("1D 0B 00 60 03 01"))  // indication, handle 0x000B: routed, then confirmed
        #expect(await values.next() == [0x60, 0x01, 0x01])
        #expect(await values.next() == [0x60, 0x03, 0x01])
        #expect(await others.next() == ATTNotification(handle: 0x0C, value: [0xAA], isIndication: false))
        #expect(try await peer.receive() == bytes("1E"))  // Handle Value Confirmation
        // The routed stream ends with the client.
        await client.close()
        #expect(await values.next() == nil)
        // After the client stopped, a new route is an ended stream.
        var late = client.notificationValues(handle: 0x0D).makeAsyncIterator()
        #expect(await late.next() == nil)
    }

    @Test func aSecondRouteForAHandleEndsTheFirst() async throws {
        var first = client.notificationValues(handle: 0x0B).makeAsyncIterator()
        var second = client.notificationValues(handle: 0x0B).makeAsyncIterator()
        #expect(await first.next() == nil)
        try await peer.send(bytes("1B 0B 00 42"))
        #expect(await second.next() == [0x42])
    }

    /// One transaction timer serves consecutive requests; it still fires 30 s after the request outstanding then.
    @Test func theTransactionTimerFollowsTheOutstandingRequest() async throws {
        async let first: ATTPDU = client.request(.readRequest(handle: 0x03))
        #expect(try await peer.receive() == bytes("0A 03 00"))
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(20))
        try await peer.send(bytes("0B 01"))  // Read Response in time
        #expect(try await first == .readResponse(value: [0x01]))
        // The second request starts at 20 s: it times out at 50 s, not at the first one's 30 s.
        let second = Task { try await client.request(.readRequest(handle: 0x05)) }
        #expect(try await peer.receive() == bytes("0A 05 00"))
        clock.advance(by: .seconds(15))  // 35 s: the timer wakes for the first deadline and sleeps on
        await clock.waitForSleepers(1)
        #expect(await client.closeReason == nil)
        clock.advance(by: .seconds(15))  // 50 s
        await #expect(throws: ATTClientError(.timeout)) { try await second.value }
    }
}
