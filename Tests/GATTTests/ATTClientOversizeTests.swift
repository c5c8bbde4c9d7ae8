import ATT
import BLECore
import TestDoubles
import Testing

@testable import GATT

/// Core v5.4 Vol 3 Part F §3.2.8: ATT_MTU is the maximum size of any packet sent between client and server (23
/// until an MTU exchange). A peer that sends a longer PDU is broken: the client closes the bearer with
/// `.oversizePDU`. Conversation scripts: the test plays the peer on the other end of an in-memory pair.
@Suite(.timeLimit(.minutes(3))) struct ATTClientOversizeTests {
    let clock = ManualClock()
    let client: ATTClient
    let peer: InMemoryBearer

    init() {
        let (clientEnd, peerEnd) = InMemoryBearer.makePair()
        client = ATTClient(bearer: clientEnd, clock: clock)
        peer = peerEnd
    }

    /// Handle Value Notification on handle 0x000B whose PDU is `length` octets: 1B 0B 00 | 60 01 01 | 00 … 00.
    static func notification(length: Int) -> [UInt8] {
        [0x1B, 0x0B, 0x00, 0x60, 0x01, 0x01] + [UInt8](repeating: 0, count: length - 6)
    }

    @Test func aNotificationOfATTMTUOctetsIsDeliveredOneMoreClosesTheBearer() async throws {
        var notifications = client.notifications.makeAsyncIterator()
        #expect(await client.mtu == 23)
        try await peer.send(Self.notification(length: 23))  // 23 octets: the default ATT_MTU, allowed
        #expect(await notifications.next()?.value.count == 20)
        try await peer.send(Self.notification(length: 24))  // 24 octets at ATT_MTU 23
        let reason = await client.disconnected()
        #expect(reason.code == .oversizePDU)
        #expect(
            reason.description
                == "oversizePDU: peer sent a 24-byte PDU (Handle Value Notification (0x1B)), longer than ATT_MTU 23")
        #expect(await notifications.next() == nil, "the oversize notification must not be delivered")
        await #expect(throws: BearerError(.disconnected)) { try await peer.receive() }
    }

    @Test func theExchangeMTUResponseRaisesTheLimit() async throws {
        var notifications = client.notifications.makeAsyncIterator()
        async let mtu = client.exchangeMTU(247)
        #expect(try await peer.receive() == bytes("02 F7 00"))  // Exchange MTU Request, Client Rx MTU 247
        try await peer.send(bytes("03 05 02"))  // Exchange MTU Response (3 octets), Server Rx MTU 517
        #expect(try await mtu == 247)
        try await peer.send(Self.notification(length: 247))
        #expect(await notifications.next()?.value.count == 244)
        try await peer.send(Self.notification(length: 248))
        let reason = await client.disconnected()
        #expect(reason.code == .oversizePDU)
        #expect(reason.reason.contains("248-byte") && reason.reason.contains("ATT_MTU 247"), "\(reason)")
    }

    @Test func aServerRxMTUBelow23LeavesTheLimitAt23() async throws {
        async let mtu = client.exchangeMTU(247)
        #expect(try await peer.receive() == bytes("02 F7 00"))
        try await peer.send(bytes("03 14 00"))  // Server Rx MTU 20: ATT_MTU stays 23
        #expect(try await mtu == 23)
        try await peer.send(Self.notification(length: 24))
        #expect(await client.disconnected().reason.contains("ATT_MTU 23"))
    }

    @Test func anOversizeResponseFailsTheOutstandingRequest() async throws {
        let read = attempt(client, .readRequest(handle: 3))
        #expect(try await peer.receive() == bytes("0A 03 00"))
        try await peer.send([0x0B] + [UInt8](repeating: 0xAA, count: 23))  // Read Response of 24 octets
        let error = await read.value.error
        #expect(error?.code == .oversizePDU)
        #expect(error?.reason.contains("Read Response") == true, "\(String(describing: error))")
        #expect(await client.closeReason?.code == .oversizePDU)
    }

    @Test func thePeersOwnExchangeMTURequestRaisesTheLimit() {
        var machine = ATTClientStateMachine(rxMTU: 185)
        // The peer's Exchange MTU Request, Client Rx MTU 247: we answer 185 and use ATT_MTU 185.
        #expect(machine.received(bytes("02 F7 00")) == [.send(bytes("03 B9 00"))])
        #expect(machine.received(Self.notification(length: 185)).count == 1)
        let actions = machine.received(Self.notification(length: 186))
        #expect(actions == [.close(ATTClientError(.oversizePDU))])
        #expect(machine.closedReason?.reason.contains("186-byte") == true)
        #expect(machine.received(Self.notification(length: 20)) == [], "nothing is delivered after the close")
    }
}
