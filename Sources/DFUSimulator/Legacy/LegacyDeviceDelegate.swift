import ATT
import BLECore
import GATT
import LegacyDFU
import Synchronization

/// The GATT application of one connection to a ``VirtualLegacyDevice``: paces PDUs with the link model and routes
/// writes to the device.
final class LegacyDeviceDelegate: GATTServerDelegate {
    let device: VirtualLegacyDevice
    let controlPoint: UInt16?
    let packet: UInt16?

    init(device: VirtualLegacyDevice, database: GATTDatabase) {
        self.device = device
        controlPoint = database.handle(of: LegacyDFUUUID.controlPoint, in: LegacyDFUUUID.service)
        packet = database.handle(of: LegacyDFUUUID.packet, in: LegacyDFUUUID.service)
    }

    func beforeHandling(_ pdu: ATTPDU, server: GATTServer) async {
        await device.pace(pdu)
    }

    func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async -> ATTErrorCode? {
        if let controlPoint, attribute.handle == controlPoint {
            let enabled = await server.isNotifying(valueHandle: controlPoint)
            return await device.controlPointWrite(value, cccdEnabled: enabled, server: server)
        }
        if let packet, attribute.handle == packet {
            return await device.packetWrite(value, withResponse: withResponse, server: server)
        }
        return nil
    }
}
