import ATT
import BLECore
import GATT
import TestDoubles
import Testing

/// `GATTServer` answers, scripted: the test plays the client on the other end of an in-memory pair.
@Suite(.timeLimit(.minutes(3))) struct GATTServerTests {
    let clock = ManualClock()
    let delegate = RecordingDelegate()
    let server: GATTServer
    let peer: InMemoryBearer

    init() {
        let (peerEnd, serverEnd) = InMemoryBearer.makePair()
        server = GATTServer(database: threeServiceDatabase(), bearer: serverEnd, delegate: delegate, clock: clock)
        peer = peerEnd
        Task { [server] in await server.run() }
    }

    /// Sends `request` and returns the server's answer.
    private func exchange(_ request: String) async throws -> [UInt8] {
        try await peer.send(bytes(request))
        return try await peer.receive()
    }

    @Test(arguments: [
        // Exchange MTU: client 517 → server answers its maximum, 247 (0x00F7).
        ("02 05 02", "03 F7 00"),
        // Starting handle 0, or start > end: Invalid PDU (0x04) with the starting handle.
        ("04 00 00 FF FF", "01 04 00 00 04"),
        ("08 05 00 04 00 03 28", "01 08 05 00 04"),
        ("10 02 00 01 00 00 28", "01 10 02 00 04"),
        // Read By Group Type of Secondary Service (0x2801): Unsupported Group Type (0x10).
        ("10 01 00 FF FF 01 28", "01 10 01 00 10"),
        // Read of a handle past the database: Invalid Handle (0x01).
        ("0A 00 0F", "01 0A 00 0F 01"),
        // Read of the write-without-response Packet (0x000E): Read Not Permitted (0x02).
        ("0A 0E 00", "01 0A 0E 00 02"),
        // Write Request on the Packet characteristic (write without response only): Write Not Permitted (0x03).
        ("12 0E 00 01", "01 12 0E 00 03"),
        // Write Request on a declaration: Write Not Permitted.
        ("12 02 00 01", "01 12 02 00 03"),
        // CCCD write of one octet: Invalid Attribute Value Length (0x0D).
        ("12 0C 00 01", "01 12 0C 00 0D"),
        // Read Blob past the end of "DfuTarg" (7 octets): Invalid Offset (0x07); at the end: empty.
        ("0C 03 00 08 00", "01 0C 03 00 07"),
        ("0C 03 00 07 00", "0D"),
        ("0C 03 00 03 00", "0D 54 61 72 67"),
        // Find Information past the last handle: Attribute Not Found (0x0A).
        ("04 0F 00 FF FF", "01 04 0F 00 0A"),
        // Find Information 0x0001-0x0003: 2800, 2803, 2A00.
        ("04 01 00 03 00", "05 01 01 00 00 28 02 00 03 28 03 00 00 2A"),
        // Read By Type 2A00 (Device Name) over everything: length 9, handle 0x0003, "DfuTarg".
        ("08 01 00 FF FF 00 2A", "09 09 03 00 44 66 75 54 61 72 67"),
        // Read By Type of characteristic declarations in GAP: two 7-octet entries.
        ("08 01 00 05 00 03 28", "09 07 02 00 02 03 00 00 2A 04 00 02 05 00 01 2A"),
        // Prepare Write Request is not supported: Request Not Supported (0x06), handle 0.
        ("16 0B 00 00 00 01", "01 16 00 00 06"),
        // Unknown non-command opcode 0x3F: Request Not Supported.
        ("3F 01", "01 3F 00 00 06"),
        // Malformed Read Request (one handle octet): Invalid PDU.
        ("0A 01", "01 0A 00 00 04"),
    ])
    func answers(request: String, response: String) async throws {
        #expect(try await exchange(request) == bytes(response))
    }

    @Test func commandsAreNeverAnswered() async throws {
        try await peer.send(bytes("52 0B 00 01"))  // Write Command on a write-only characteristic: dropped silently.
        try await peer.send(bytes("52 0E 00 01"))  // Write Command on Packet: accepted.
        try await peer.send(bytes("7F 01"))  // unknown command: ignored.
        try await peer.send(bytes("1E"))  // confirmation with no indication: ignored.
        #expect(try await exchange("0A 0E 00") == bytes("01 0A 0E 00 02"))  // next answer belongs to this request
        #expect(delegate.writes == ["0E 01 cmd"])
        #expect(await server.value(handle: 0x0E) == [0x01])
        #expect(delegate.handled == [.writeCommand, .writeCommand, ATTOpcode(0x7F), .handleValueConfirmation, .readRequest])
    }

    @Test func cccdIsKeptPerConnectionAndReported() async throws {
        #expect(try await exchange("0A 0C 00") == bytes("0B 00 00"))
        #expect(try await exchange("12 0C 00 02 00") == bytes("13"))
        #expect(await server.isIndicating(valueHandle: 0x0B))
        #expect(await server.isNotifying(valueHandle: 0x0B) == false)
        #expect(try await exchange("0A 0C 00") == bytes("0B 02 00"))
        #expect(delegate.configurations == ["0B 0002"])
    }

    @Test func indicationTimesOutWithoutConfirmation() async throws {
        let indication = Task { try await server.indicate(handle: 0x0B, value: [0x01]) }
        #expect(try await peer.receive() == bytes("1D 0B 00 01"))
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(30))
        await #expect(throws: GATTServerError(.timeout)) { try await indication.value }
        #expect(await server.disconnected().code == .timeout)
        await #expect(throws: BearerError(.disconnected)) { try await peer.receive() }
    }

    @Test func notificationsAreTruncatedToTheMTU() async throws {
        try await server.notify(handle: 0x0B, value: Array(repeating: 0x55, count: 30))
        let pdu = try await peer.receive()
        #expect(pdu.count == 23)  // opcode + handle + 20 octets at ATT_MTU 23
        #expect(Array(pdu.prefix(3)) == bytes("1B 0B 00"))
    }

    @Test func peerDisconnectEndsTheServer() async throws {
        await peer.close()
        #expect(await server.disconnected().code == .disconnected)
        await #expect(throws: GATTServerError(.disconnected)) { try await server.notify(handle: 0x0B, value: [1]) }
    }

    @Test func serverUsesTheSmallerMTU() async throws {
        #expect(try await exchange("02 40 00") == bytes("03 F7 00"))  // client Rx 64
        #expect(await server.mtu == 64)
    }
}
