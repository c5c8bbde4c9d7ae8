import ATT
import BLECore
import GATT
import Testing
import VirtualRadio

/// GATT client against GATT server over a real `socketpair(AF_UNIX, SOCK_SEQPACKET)`.
@Suite(.timeLimit(.minutes(3))) struct SeqPacketGATTTests {
    @Test func discoverWriteNotifyAndLongReadOverASocketPair() async throws {
        let (clientEnd, serverEnd) = try SeqPacketBearer.makePair()
        let server = GATTServer(database: threeServiceDatabase(), bearer: serverEnd)
        let running = Task { await server.run() }
        let att = ATTClient(bearer: clientEnd)
        let client = GATTClient(att: att)

        #expect(try await att.exchangeMTU() == 247)
        let services = try await client.discoverAll()
        #expect(services.map(\.uuid) == [TestUUIDs.gap, TestUUIDs.deviceInformation, TestUUIDs.dfu])
        let controlPoint = try #require(services[2].characteristic(TestUUIDs.controlPoint))
        #expect(controlPoint.cccdHandle == 0x0C)

        #expect(try await client.readLong(handle: 8) == (0..<60).map { UInt8($0) })
        #expect(try await client.read(handle: 3) == Array("DfuTarg".utf8))

        var notifications = client.notifications.makeAsyncIterator()
        try await client.setNotifications(true, of: controlPoint)
        #expect(await server.isNotifying(valueHandle: 0x0B))
        try await client.write(handle: 0x0B, value: [0x06, 0x01])
        try await server.notify(handle: 0x0B, value: [0x60, 0x06, 0x01])
        #expect(await notifications.next() == ATTNotification(handle: 0x0B, value: [0x60, 0x06, 0x01], isIndication: false))

        try await client.writeWithoutResponse(handle: 0x0E, value: [1, 2, 3])
        // The Write Command has no answer; a following read proves it was handled first.
        #expect(try await client.read(handle: 0x0C) == [0x01, 0x00])
        #expect(await server.value(handle: 0x0E) == [1, 2, 3])

        let refusal = await #expect(throws: ATTClientError.self) {
            try await client.write(handle: 0x0E, value: [1])
        }
        #expect(refusal?.code == .remote && refusal?.attError == .writeNotPermitted && refusal?.handle == 0x0E)

        await att.close()
        #expect(await running.value.code == .disconnected)
        #expect(await att.disconnected().code == .closed)
    }
}
