import ATT
import BLECore
import DFUProtocol
import GATT
import Synchronization
import TestDoubles
import Testing

@testable import SecureDFU

/// A GATT server application that puts a ``FakeBootloader`` behind the Secure DFU characteristics.
final class FakeBootloaderApp: GATTServerDelegate {
    let device: Mutex<FakeBootloader>
    let controlPointHandle: UInt16
    let packetHandle: UInt16

    init(device: FakeBootloader, database: GATTDatabase) {
        self.device = Mutex(device)
        controlPointHandle = database.handle(of: SecureDFUUUID.controlPoint, in: SecureDFUUUID.service) ?? 0
        packetHandle = database.handle(of: SecureDFUUUID.packet, in: SecureDFUUUID.service) ?? 0
    }

    static let database = GATTDatabase(services: [
        GATTServiceDefinition(
            uuid: SecureDFUUUID.service,
            characteristics: [
                GATTCharacteristicDefinition(uuid: SecureDFUUUID.controlPoint, properties: [.write, .notify]),
                GATTCharacteristicDefinition(uuid: SecureDFUUUID.packet, properties: [.writeWithoutResponse]),
            ])
    ])

    func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async
        -> ATTErrorCode?
    {
        let replies: [[UInt8]]
        if attribute.handle == controlPointHandle {
            guard await server.isNotifying(valueHandle: controlPointHandle) else {
                return ATTErrorCode(rawValue: 0xFD)  // CCCD improperly configured
            }
            replies = device.withLock { $0.controlPoint(value) }
        } else if attribute.handle == packetHandle {
            replies = device.withLock { $0.packet(value) }
        } else {
            return nil
        }
        for reply in replies { try? await server.notify(handle: controlPointHandle, value: reply) }
        return nil
    }
}

@Suite(.timeLimit(.minutes(5))) struct GATTTransportTests {
    @Test func updatesThroughGATTOverAnInMemoryBearer() async throws {
        let (clientEnd, serverEnd) = InMemoryBearer.makePair(capacity: 64)
        let app = FakeBootloaderApp(device: FakeBootloader(), database: FakeBootloaderApp.database)
        let server = GATTServer(database: FakeBootloaderApp.database, bearer: serverEnd, maximumMTU: 247, delegate: app)
        let serverTask = Task { await server.run() }
        let att = ATTClient(bearer: clientEnd)
        let mtu = try await att.exchangeMTU(247)
        #expect(mtu == 247)
        let transport = try await GATTDFUTransport.open(client: GATTClient(att: att))
        #expect(await transport.mtu == 247)
        let part = testPart(imageSize: 9000)
        let driver = SecureDFUDriver(transport: transport, clock: AutoPauseClock())
        try await driver.run(part: part)
        let firmware = app.device.withLock { $0.firmware }
        #expect(firmware == part.image)
        await att.close()
        _ = await serverTask.value
    }

    @Test func openFailsWithoutTheDFUService() async throws {
        let (clientEnd, serverEnd) = InMemoryBearer.makePair()
        let database = GATTDatabase(services: [
            GATTServiceDefinition(
                uuid: BluetoothUUID(0x180A),
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID(0x2A29), properties: [.read], value: Array("bledfu".utf8))
                ])
        ])
        let server = GATTServer(database: database, bearer: serverEnd)
        let serverTask = Task { await server.run() }
        let att = ATTClient(bearer: clientEnd)
        await #expect(throws: DFUTransportError(.rejected, "")) {
            try await GATTDFUTransport.open(client: GATTClient(att: att))
        }
        await att.close()
        _ = await serverTask.value
    }
}
