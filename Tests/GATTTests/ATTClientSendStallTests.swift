import ATT
import BLECore
import TestDoubles
import Testing

@testable import GATT

/// A peer that stops reading: the bearer takes no more PDUs and a Write Command would wait for it forever. The ATT
/// client bounds every hand-over to the bearer by the transaction timeout (30 s): then it closes the link with
/// `.timeout` and every waiting caller fails. Time is a `ManualClock`; the peer is the far end of an in-memory pair
/// that holds one PDU per direction.
@Suite(.timeLimit(.minutes(3))) struct ATTClientSendStallTests {
    let clock = ManualClock()
    let client: ATTClient
    let peer: InMemoryBearer

    init() {
        let (clientEnd, peerEnd) = InMemoryBearer.makePair(capacity: 1)
        client = ATTClient(bearer: clientEnd, clock: clock)
        peer = peerEnd
    }

    @Test func aLinkThatTakesNoPDUForThirtySecondsIsClosedWithATimeout() async throws {
        // Write Command (0x52) to handle 0x000E: the first fills the link's only slot, the second waits for room.
        try await client.command(.writeCommand(handle: 0x0E, value: [0x01]))
        let second = Task { [client] in try await client.command(.writeCommand(handle: 0x0E, value: [0x02])) }
        // Until the write loop waits for the bearer to take the second one (each iteration lets the others run).
        var spins = 0
        while client.handOverWaitingSince == nil, spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
        #expect(client.handOverWaitingSince == .zero)
        await clock.waitForSleepers(1)  // the client's timer watches the waiting hand-over
        clock.advance(by: .seconds(29))
        #expect(await client.closeReason == nil)  // 29 s: still waiting
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(1))
        await #expect(throws: ATTClientError(.timeout)) { try await second.value }
        #expect(await client.disconnected().code == .timeout)
        #expect(await client.closeReason?.reason == "the link took no PDU within the ATT timeout")
        // The PDU the link had taken is still there for the peer; nothing after it.
        #expect(try await peer.receive() == [0x52, 0x0E, 0x00, 0x01])
    }

    @Test func aLinkThatKeepsTakingPDUsIsNeverTimedOut() async throws {
        // Forty Write Commands, one second apart on the manual clock, each taken by the peer: 40 s in all, longer than
        // the timeout, but no hand-over waits for more than one second.
        for index in 0..<40 {
            let value = [UInt8(index)]
            try await client.command(.writeCommand(handle: 0x0E, value: value))
            #expect(try await peer.receive() == [0x52, 0x0E, 0x00] + value)
            clock.advance(by: .seconds(1))
        }
        #expect(await client.closeReason == nil)
        // A request still times out by its own timer (Core v5.4 Vol 3 Part F §3.3.3).
        let read = Task { [client] in try await client.request(.readRequest(handle: 0x03)) }
        #expect(try await peer.receive() == [0x0A, 0x03, 0x00])
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(30))
        await #expect(throws: ATTClientError(.timeout)) { _ = try await read.value }
    }
}
