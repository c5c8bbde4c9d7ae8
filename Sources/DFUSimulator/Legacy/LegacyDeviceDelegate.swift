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

/// The link model's pacing of PDUs, kept apart from the device actor so that pacing needs no hop onto it.
final class LinkPacer: Sendable {
    private struct State {
        var freeAt: Duration = .zero
        var writeCommandMicrosBySize: [Int: Double] = [:]
    }

    let model: LinkModel
    let speedup: Double
    private let state = Mutex(State())

    init(model: LinkModel, speedup: Double) {
        self.model = model
        self.speedup = speedup > 0 ? speedup : 1
    }

    func reset(at now: Duration) { state.withLock { $0.freeAt = now } }

    /// How long `pdu` must wait until the modelled link has carried it (and books the link until then).
    func cost(of pdu: ATTPDU, now: Duration) -> Duration {
        let attBytes: Int?
        switch pdu {
        case .writeCommand(_, let value): attBytes = 3 + value.count
        case .writeRequest, .readRequest, .readBlobRequest, .readByTypeRequest, .readByGroupTypeRequest,
            .findInformationRequest, .findByTypeValueRequest, .exchangeMTURequest:
            attBytes = nil
        default: attBytes = pdu.encoded.count
        }
        return state.withLock { state -> Duration in
            let micros: Double
            if let attBytes {
                if let known = state.writeCommandMicrosBySize[attBytes] {
                    micros = known
                } else {
                    micros = model.writeCommandMicros(attBytes: attBytes)
                    state.writeCommandMicrosBySize[attBytes] = micros
                }
            } else {
                micros = model.requestRoundTripMicros
            }
            let start = max(now, state.freeAt)
            state.freeAt = start + .nanoseconds(Int64((micros * 1000 / speedup).rounded()))
            return state.freeAt - now
        }
    }
}
