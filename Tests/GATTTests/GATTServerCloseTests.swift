import ATT
import BLECore
import GATT
import Synchronization
import TestDoubles
import Testing

/// `GATTServer.closeAfterResponse()`: a delegate that ends the link while the server handles a PDU (a device that
/// resets after its last answer) gets its notifications and the response out before the bearer closes.
///
/// An earlier version of the first test hung instead of failing: it awaited `server.disconnected()`, a continuation
/// that only the close resumes and that cancellation cannot end, so a server that did not close kept the test (and
/// the suite's time limit) waiting for ever. These tests first send one more request: a server that closed never
/// reads it (the client sees the link end), one that stayed open answers it, and `#require` stops the test before
/// any wait that only a close would end.
@Suite(.timeLimit(.minutes(3))) struct GATTServerCloseTests {
    /// Sends a Read Request for the Device Name (0x0003) after the closing PDU; true when the link ended instead.
    static func nextRequestFails(_ client: GATTClient) async -> Bool {
        (try? await client.read(handle: 0x03)) == nil
    }

    /// The next PDU on the raw `end` is the end of the link (`.disconnected`), not an answer.
    static func linkEnds(_ end: InMemoryBearer) async -> Bool {
        do throws(BearerError) {
            _ = try await end.receive()
            return false
        } catch {
            return error.code == .disconnected
        }
    }

    @Test func closeAfterResponseSendsTheWriteResponseFirst() async throws {
        let trace = EventTrace()
        let delegate = ClosingDelegate(trace: trace, notification: [0x60, 0x04, 0x01])
        let (clientEnd, serverEnd) = InMemoryBearer.makePair(observer: trace)
        let server = GATTServer(database: threeServiceDatabase(), bearer: serverEnd, delegate: delegate)
        let running = Task { await server.run() }
        let client = GATTClient(att: ATTClient(bearer: clientEnd))
        var notifications = client.notifications.makeAsyncIterator()

        // Succeeds only when the Write Response arrived before the link ended.
        try await client.write(handle: 0x0B, value: [0x04])
        #expect(await notifications.next() == ATTNotification(handle: 0x0B, value: [0x60, 0x04, 0x01], isIndication: false))
        try #require(await Self.nextRequestFails(client), "the server answered a request after closeAfterResponse")
        let reason = await running.value
        #expect(reason == GATTServerError(.disconnected))
        #expect(reason.reason == "closed by the server after the response")
        #expect(await client.att.disconnected().code == .disconnected)
        // The Read Request may have been taken by the bearer before it closed ("> 0A 03 00"); it is never answered.
        #expect(
            trace.lines.filter { $0 != "> 0A 03 00" } == [
                "> 12 0B 00 04",  // Write Request, handle 0x000B, value 04
                "< 1B 0B 00 60 04 01",  // Handle Value Notification, handle 0x000B, value 60 04 01
                "< 13",  // Write Response
                "closed",  // the delegate's `disconnected`, called after the bearer closed
            ])
        #expect(delegate.closeCallsReturned == 1)  // closeAfterResponse returned while the write was handled
    }

    @Test func closeAfterResponseFollowsAnErrorResponse() async throws {
        let trace = EventTrace()
        let delegate = ClosingDelegate(trace: trace, refusal: .cccdImproperlyConfigured)
        let (clientEnd, serverEnd) = InMemoryBearer.makePair(observer: trace)
        let server = GATTServer(database: threeServiceDatabase(), bearer: serverEnd, delegate: delegate)
        let running = Task { await server.run() }
        let client = GATTClient(att: ATTClient(bearer: clientEnd))
        let refusal = await #expect(throws: ATTClientError.self) {
            try await client.write(handle: 0x0B, value: [0x01])
        }
        #expect(refusal?.code == .remote && refusal?.attError == .cccdImproperlyConfigured && refusal?.handle == 0x0B)
        try #require(await Self.nextRequestFails(client))
        #expect(await running.value == GATTServerError(.disconnected))
        // Error Response: request 0x12, handle 0x000B, code 0xFD; then the close.
        #expect(trace.lines.filter { $0 != "> 0A 03 00" } == ["> 12 0B 00 01", "< 01 12 0B 00 FD", "closed"])
    }

    @Test func closeAfterResponseOnACommandClosesAfterHandlingIt() async throws {
        let trace = EventTrace()
        let delegate = ClosingDelegate(trace: trace, notification: [0x01])
        let (clientEnd, serverEnd) = InMemoryBearer.makePair(observer: trace)
        let server = GATTServer(database: threeServiceDatabase(), bearer: serverEnd, delegate: delegate)
        let running = Task { await server.run() }
        // Write Command on Packet (0x000E): the delegate notifies on 0x000B and asks for the close; no response.
        try await clientEnd.send(bytes("52 0E 00 AA"))
        #expect(try await clientEnd.receive() == bytes("1B 0B 00 01"))
        try? await clientEnd.send(bytes("0A 03 00"))  // never answered (the send itself may find the link closed)
        try #require(await Self.linkEnds(clientEnd), "the server answered a request after closeAfterResponse")
        #expect(await running.value == GATTServerError(.disconnected))
        #expect(trace.lines.filter { $0 != "> 0A 03 00" } == ["> 52 0E 00 AA", "< 1B 0B 00 01", "closed"])
        #expect(await server.value(handle: 0x0E) == [0xAA])  // the write was applied before the close
    }

    @Test func closeAfterResponseOutsideHandlingClosesAtOnce() async throws {
        let trace = EventTrace()
        let delegate = ClosingDelegate(trace: trace)
        let (clientEnd, serverEnd) = InMemoryBearer.makePair(observer: trace)
        let server = GATTServer(database: threeServiceDatabase(), bearer: serverEnd, delegate: delegate)
        let running = Task { await server.run() }
        await server.closeAfterResponse()
        try? await clientEnd.send(bytes("0A 03 00"))
        try #require(await Self.linkEnds(clientEnd), "the server answered a request after closeAfterResponse")
        #expect(await running.value.reason == "closed by the server")
        #expect(trace.lines.filter { $0 != "> 0A 03 00" } == ["closed"])
        #expect(delegate.handled.isEmpty)
    }

    @Test func aRequestAfterTheClosingOneIsNeverHandled() async throws {
        let trace = EventTrace()
        let delegate = ClosingDelegate(trace: trace)
        let (clientEnd, serverEnd) = InMemoryBearer.makePair(observer: trace)
        let server = GATTServer(database: threeServiceDatabase(), bearer: serverEnd, delegate: delegate)
        let running = Task { await server.run() }
        // Both PDUs are queued before the server reads the first: the second must die with the link.
        try await clientEnd.send(bytes("12 0B 00 05"))
        try await clientEnd.send(bytes("0A 03 00"))
        #expect(try await clientEnd.receive() == bytes("13"))
        try #require(await Self.linkEnds(clientEnd), "the server answered the request after the closing one")
        #expect(await running.value == GATTServerError(.disconnected))
        #expect(delegate.handled == [.writeRequest])
    }

    /// The guard above can fail: without `closeAfterResponse` the next request is answered and the link stays up.
    @Test func aServerThatStaysOpenAnswersTheNextRequest() async throws {
        let link = Link(delegate: RecordingDelegate())
        try await link.client.write(handle: 0x0B, value: [0x04])
        #expect(await Self.nextRequestFails(link.client) == false)
        #expect(link.recorder.trace == ["> 12 0B 00 04", "< 13", "> 0A 03 00", "< 0B 44 66 75 54 61 72 67"])  // "DfuTarg"
    }

    /// The same conversation on the shared `Link` fixture (GATTClient, ManualClock), as the hung test had it.
    @Test func closeAfterResponseOnTheSharedLinkFixture() async throws {
        let trace = EventTrace()
        let link = Link(delegate: ClosingDelegate(trace: trace, notification: [0x60, 0x04, 0x01]))
        try await link.client.write(handle: 0x0B, value: [0x04])
        try #require(await Self.nextRequestFails(link.client))
        #expect(await link.server.disconnected().code == .disconnected)
        #expect(
            link.recorder.trace.filter { $0 != "> 0A 03 00" } == ["> 12 0B 00 04", "< 1B 0B 00 60 04 01", "< 13"])
        #expect(trace.lines == ["closed"])
    }
}

/// PDUs crossing an in-memory pair ("> hex" client to server, "< hex" server to client) and named events, in one
/// order.
final class EventTrace: PDUObserver {
    private let entries = Mutex<[String]>([])
    func observe(pdu: [UInt8], sent: Bool) {
        note((sent ? "> " : "< ") + pdu.map { hex2($0) }.joined(separator: " "))
    }
    func note(_ event: String) { entries.withLock { $0.append(event) } }
    var lines: [String] { entries.withLock { $0 } }
}

/// On every write: optionally notifies on 0x000B, then asks the server to close after its response, and answers
/// `refusal`. Records "closed" when the link ends.
final class ClosingDelegate: GATTServerDelegate {
    private struct State {
        var returned = 0
        var handled: [ATTOpcode] = []
    }
    let trace: EventTrace
    let notification: [UInt8]?
    let refusal: ATTErrorCode?
    private let state = Mutex(State())

    init(trace: EventTrace, notification: [UInt8]? = nil, refusal: ATTErrorCode? = nil) {
        self.trace = trace
        self.notification = notification
        self.refusal = refusal
    }

    var closeCallsReturned: Int { state.withLock { $0.returned } }
    var handled: [ATTOpcode] { state.withLock { $0.handled } }

    func beforeHandling(_ pdu: ATTPDU, server: GATTServer) async {
        state.withLock { $0.handled.append(pdu.opcode) }
    }

    func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async
        -> ATTErrorCode?
    {
        if let notification { try? await server.notify(handle: 0x0B, value: notification) }
        // Re-enters the server actor while it awaits this method: must not wait for the close itself.
        await server.closeAfterResponse()
        state.withLock { $0.returned += 1 }
        return refusal
    }

    func disconnected(_ reason: GATTServerError, server: GATTServer) async {
        trace.note("closed")
    }
}
