import BLECore
import DFUCore
import GATT
import LegacyDFU
import Logging
import Testing
import VirtualRadio

/// `LegacyDFUFamily.detect` over a real SEQPACKET pair against a GATT server with the Legacy DFU service: the DFU
/// Version decides the mode; a version that cannot be read or decoded is an error, never "no DFU Version" (which
/// would take an SDK 11 application for an SDK <= 6 bootloader).
@Suite(.timeLimit(.minutes(2))) struct FamilyDetectTests {
    static func detect(_ version: GATTCharacteristicDefinition) async throws -> Result<DetectedMode?, DFUError> {
        let service = GATTServiceDefinition(
            uuid: LegacyDFUUUID.service,
            characteristics: [
                GATTCharacteristicDefinition(uuid: LegacyDFUUUID.packet, properties: [.writeWithoutResponse]),
                GATTCharacteristicDefinition(uuid: LegacyDFUUUID.controlPoint, properties: [.write, .notify]), version,
            ])
        let (client, server) = try SeqPacketBearer.makePair()
        let gattServer = GATTServer(database: GATTDatabase(services: [service]), bearer: server)
        let serving = Task { await gattServer.run() }
        let gatt = GATTClient(att: ATTClient(bearer: client))
        let link = DFULink(gatt: gatt, peer: PeerAddress(LegacyFixture.address, type: .random))
        let context = UpdateContext(
            clock: .continuous, options: UpdateOptions(), logger: Logger(label: "test"), emit: { _ in },
            connect: { _ throws(DFUError) in throw DFUError(.notFound, "no second connection in this test") })
        let result: Result<DetectedMode?, DFUError>
        do {
            let services = try await gatt.discoverPrimaryServices()
            result = .success(try await LegacyDFUFamily().detect(services, on: link, context: context)?.mode)
        } catch let error as DFUError {
            result = .failure(error)
        }
        await gatt.att.close()
        _ = await serving.value
        return result
    }

    @Test func versionDecidesOrFails() async throws {
        // 01 00: DFU Version 0.1, an SDK 11 application with the buttonless entry.
        let application = try await Self.detect(GATTCharacteristicDefinition(uuid: LegacyDFUUUID.version, properties: [.read], value: [0x01, 0x00]))
        #expect(try application.get() == .application)
        // 08 00: 0.8 and nothing but the DFU service: the bootloader.
        let bootloader = try await Self.detect(GATTCharacteristicDefinition(uuid: LegacyDFUUUID.version, properties: [.read], value: [0x08, 0x00]))
        #expect(try bootloader.get() == .updater)
        // 08: one byte, not a version.
        let short = try await Self.detect(GATTCharacteristicDefinition(uuid: LegacyDFUUUID.version, properties: [.read], value: [0x08]))
        guard case .failure(let malformed) = short else {
            Issue.record("a 1-byte DFU Version was taken: \(short)")
            return
        }
        #expect(malformed.code == .protocolViolation && malformed.message.contains("1 byte(s)"), "\(malformed)")
        // Not readable: the server answers the read with an ATT error, which is the detection's error.
        let unreadable = try await Self.detect(GATTCharacteristicDefinition(uuid: LegacyDFUUUID.version, properties: [.read], permissions: [], value: [0x01, 0x00]))
        guard case .failure(let refused) = unreadable else {
            Issue.record("an unreadable DFU Version was taken as none: \(unreadable)")
            return
        }
        #expect(refused.code == .protocolViolation && refused.message.contains("DFU Version"), "\(refused)")
    }
}
