import ATT
import BLECore
import GATT
import Synchronization
import TestDoubles

/// Records every PDU crossing an in-memory pair, as "> hex" (client to server) and "< hex" (server to client).
final class PDURecorder: PDUObserver {
    private let lines = Mutex<[String]>([])
    func observe(pdu: [UInt8], sent: Bool) {
        let text = (sent ? "> " : "< ") + pdu.map { hex2($0) }.joined(separator: " ")
        lines.withLock { $0.append(text) }
    }
    var trace: [String] { lines.withLock { $0 } }
    func reset() { lines.withLock { $0.removeAll() } }
}

func hex2(_ byte: UInt8) -> String {
    let text = String(byte, radix: 16, uppercase: true)
    return text.count == 1 ? "0" + text : text
}

/// "0A 03 00" → [0x0A, 0x03, 0x00].
func bytes(_ text: String) -> [UInt8] {
    text.split(separator: " ").compactMap { UInt8($0, radix: 16) }
}

enum TestUUIDs {
    static let gap = BluetoothUUID(0x1800)
    static let deviceName = BluetoothUUID(0x2A00)
    static let appearance = BluetoothUUID(0x2A01)
    static let deviceInformation = BluetoothUUID(0x180A)
    static let manufacturer = BluetoothUUID(0x2A29)
    static let dfu = BluetoothUUID(0xFE59)
    // 8EC90001-F315-4F60-9FB8-838830DAEA50, little-endian on the wire: 50 EA DA 30 88 83 B8 9F 60 4F 15 F3 01 00 C9 8E
    static let controlPoint = BluetoothUUID("8EC90001-F315-4F60-9FB8-838830DAEA50")!
    static let packet = BluetoothUUID("8EC90002-F315-4F60-9FB8-838830DAEA50")!
}

/// Three services, handles:
///   0x0001 GAP 1800 (to 0x0005): 0x0002 decl, 0x0003 Device Name (read), 0x0004 decl, 0x0005 Appearance (read)
///   0x0006 Device Information 180A (to 0x0008): 0x0007 decl, 0x0008 Manufacturer (read, 60-octet value)
///   0x0009 DFU FE59 (to 0x000E): 0x000A decl, 0x000B Control Point (write, notify), 0x000C CCCD,
///                                0x000D decl, 0x000E Packet (write without response)
func threeServiceDatabase() -> GATTDatabase {
    GATTDatabase(services: [
        GATTServiceDefinition(
            uuid: TestUUIDs.gap,
            characteristics: [
                GATTCharacteristicDefinition(uuid: TestUUIDs.deviceName, properties: [.read], value: Array("DfuTarg".utf8)),
                GATTCharacteristicDefinition(uuid: TestUUIDs.appearance, properties: [.read], value: [0x00, 0x00]),
            ]),
        GATTServiceDefinition(
            uuid: TestUUIDs.deviceInformation,
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: TestUUIDs.manufacturer, properties: [.read], value: (0..<60).map { UInt8($0) })
            ]),
        GATTServiceDefinition(
            uuid: TestUUIDs.dfu,
            characteristics: [
                GATTCharacteristicDefinition(uuid: TestUUIDs.controlPoint, properties: [.write, .notify]),
                GATTCharacteristicDefinition(uuid: TestUUIDs.packet, properties: [.writeWithoutResponse]),
            ]),
    ])
}

/// A GATT client and server on an in-memory pair, the server running.
struct Link {
    let client: GATTClient
    let server: GATTServer
    let recorder: PDURecorder

    init(database: GATTDatabase = threeServiceDatabase(), delegate: (any GATTServerDelegate)? = nil,
         clock: ManualClock = ManualClock(), maximumMTU: UInt16 = 247) {
        let recorder = PDURecorder()
        let (clientEnd, serverEnd) = InMemoryBearer.makePair(observer: recorder)
        let server = GATTServer(
            database: database, bearer: serverEnd, maximumMTU: maximumMTU, delegate: delegate, clock: clock)
        Task { await server.run() }
        self.server = server
        self.client = GATTClient(att: ATTClient(bearer: clientEnd, clock: clock))
        self.recorder = recorder
    }
}
