import ATT
import BLECore
import GATT
import LinuxIO
import TestDoubles
import Testing
import VirtualRadio

/// Link security on the virtual radio (docs/virtual-radio.md §4.1), over real SEQPACKET socket pairs.
@Suite("Virtual radio link security", .timeLimit(.minutes(5)))
struct VirtualLinkSecurityTests {
    /// A generous answer timeout: under load (two CPU hogs, the whole suite) the answer may wait for a thread.
    func pair(
        device maximum: LinkSecurityLevel = .medium, timeout: Duration = .seconds(120)
    ) throws -> (VirtualSecureLink, VirtualSecureLink) {
        let (a, b) = try SocketDescriptor.seqPacketPair()
        return (
            VirtualSecureLink(SocketBearer(descriptor: a), role: .central(timeout: timeout)),
            VirtualSecureLink(SocketBearer(descriptor: b), role: .peripheral(maximum: maximum))
        )
    }

    @Test("Message bytes: FF 53 <level>; anything else is no security message")
    func codec() {
        // FF: ATT opcode with the Command flag and no assigned method; 53 "S"; 02: medium (encrypted).
        #expect(VirtualLinkSecurityMessage.encode(.medium) == [0xFF, 0x53, 0x02])
        #expect(VirtualLinkSecurityMessage.decode([0xFF, 0x53, 0x02]) == .medium)
        #expect(VirtualLinkSecurityMessage.decode([0xFF, 0x53, 0x04]) == .fips)
        // Every truncated prefix, an unknown level, a longer message, an ATT PDU.
        #expect(VirtualLinkSecurityMessage.decode([]) == nil)
        #expect(VirtualLinkSecurityMessage.decode([0xFF]) == nil)
        #expect(VirtualLinkSecurityMessage.decode([0xFF, 0x53]) == nil)
        #expect(VirtualLinkSecurityMessage.decode([0xFF, 0x53, 0x05]) == nil)
        #expect(VirtualLinkSecurityMessage.decode([0xFF, 0x53, 0x02, 0x00]) == nil)
        #expect(VirtualLinkSecurityMessage.decode([0x12, 0x03, 0x00, 0x01]) == nil)
    }

    @Test("The central raises the link to encrypted; both ends see it; ATT PDUs pass untouched around the exchange")
    func raise() async throws {
        let (central, device) = try pair()
        let echo = Task { () throws(BearerError) -> [UInt8] in
            let pdu = try await device.receive()  // the security message never reaches ATT
            try await device.send([0x13])
            return pdu
        }
        // The answer is taken out of the stream by the central's receive: a reader runs, as the ATT client's does.
        let reader = Task { () throws(BearerError) -> [UInt8] in try await central.receive() }
        #expect(await central.securityLevel() == .low)
        #expect(try await central.raiseSecurity(to: .medium) == .medium)
        #expect(await central.securityLevel() == .medium)
        try await central.send([0x12, 0x03, 0x00, 0x01])
        #expect(try await echo.value == [0x12, 0x03, 0x00, 0x01])
        #expect(try await reader.value == [0x13])
        #expect(await device.securityLevel() == .medium)
        // Already there: no exchange.
        #expect(try await central.raiseSecurity(to: .low) == .medium)
        await central.close()
        await device.close()
    }

    @Test("A device grants no more than it can: asked for high, it answers medium, and the central reports that")
    func partialGrant() async throws {
        let (central, device) = try pair(device: .medium)
        let reader = Task { () throws(BearerError) -> [UInt8] in try await device.receive() }
        let centralReader = Task { () throws(BearerError) -> [UInt8] in try await central.receive() }
        #expect(try await central.raiseSecurity(to: .high) == .medium)
        await central.close()
        await #expect(throws: BearerError.self) { _ = try await reader.value }
        await #expect(throws: BearerError.self) { _ = try await centralReader.value }
        await device.close()
    }

    @Test("A device that does not know the message ignores it: the central says so after its timeout")
    func oldDevice() async throws {
        let (a, b) = try SocketDescriptor.seqPacketPair()
        let central = VirtualSecureLink(SocketBearer(descriptor: a), role: .central(timeout: .milliseconds(200)))
        let device = SocketBearer(descriptor: b)
        let reader = Task { () throws(BearerError) -> [UInt8] in try await device.receive() }
        do {
            _ = try await central.raiseSecurity(to: .medium)
            Issue.record("raised against a device that never answers")
        } catch {
            #expect(error.code == .timeout)
            #expect(error.reason.contains("does not support link security"))
        }
        // The device saw an unknown ATT command (0xFF: Command flag set), which ATT servers ignore.
        #expect(try await reader.value == [0xFF, 0x53, 0x02])
        #expect(await central.securityLevel() == .low)
        await central.close()
        await device.close()
    }

    @Test("GATT: a write needing encryption gets 0x05 on a low link; the GATT client raises the link and retries")
    func gattRaisesAndRetries() async throws {
        let (central, device) = try pair()
        let database = GATTDatabase(services: [
            GATTServiceDefinition(
                uuid: BluetoothUUID(0xFE59),
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID(0xAAAA), properties: [.write, .writeWithoutResponse],
                        permissions: [.write, .encryptionRequired])
                ])
        ])
        let server = GATTServer(database: database, bearer: device)
        let serving = Task { await server.run() }
        let att = ATTClient(bearer: central)
        let client = GATTClient(att: att)
        let value = try #require(database.handle(of: BluetoothUUID(0xAAAA), in: BluetoothUUID(0xFE59)))
        // A Write Command below the level is dropped; a Write Request is refused with Insufficient Authentication.
        try await client.writeWithoutResponse(handle: value, value: [0x01])
        do {
            _ = try await att.request(.writeRequest(handle: value, value: [0x02]))
            Issue.record("a write below the level was accepted")
        } catch {
            #expect(error.attError == .insufficientAuthentication)
        }
        #expect(await server.value(handle: value) == [])
        try await client.write(handle: value, value: [0x03])
        #expect(await server.value(handle: value) == [0x03])
        #expect(await central.securityLevel() == .medium)
        await att.close()
        _ = await serving.value
    }

    @Test("GATT: where the link cannot be raised, the write error says so")
    func gattCannotRaise() async throws {
        let (central, device) = InMemoryBearer.makePair(maximumSecurity: nil)
        let database = GATTDatabase(services: [
            GATTServiceDefinition(
                uuid: BluetoothUUID(0xFE59),
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID(0xAAAA), properties: [.write], permissions: [.write, .encryptionRequired])
                ])
        ])
        let server = GATTServer(database: database, bearer: device)
        let serving = Task { await server.run() }
        let att = ATTClient(bearer: central)
        let value = try #require(database.handle(of: BluetoothUUID(0xAAAA), in: BluetoothUUID(0xFE59)))
        do {
            try await GATTClient(att: att).write(handle: value, value: [0x01])
            Issue.record("written without link security")
        } catch {
            #expect(error.attError == .insufficientAuthentication)
            #expect(error.reason.contains("could not be raised"))
        }
        await att.close()
        _ = await serving.value
    }
}
