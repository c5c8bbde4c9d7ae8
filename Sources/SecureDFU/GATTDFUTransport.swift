import ATT
import DFUProtocol
import GATT

/// ``DFUTransport`` over a `GATTClient`: finds the Secure DFU service (FE59) with its Control Point and Packet
/// characteristics, enables Control Point notifications (without them the bootloader answers ATT 0xFD), and
/// takes the Control Point's notifications from the ATT client (`ATTClient.notificationValues(handle:)`; other
/// handles' notifications stay in the client's stream).
public struct GATTDFUTransport: DFUTransport {
    public let client: GATTClient
    public let controlPoint: GATTCharacteristic
    public let packet: GATTCharacteristic
    public let controlPointNotifications: AsyncStream<[UInt8]>

    /// Wraps characteristics discovered by the caller; starts forwarding notifications at once.
    public init(client: GATTClient, controlPoint: GATTCharacteristic, packet: GATTCharacteristic) {
        self.client = client
        self.controlPoint = controlPoint
        self.packet = packet
        // Straight from the ATT client's read loop: no forwarding task per notification.
        controlPointNotifications = client.att.notificationValues(handle: controlPoint.valueHandle)
    }

    /// Discovers the DFU characteristics (at `uuids`: the standard ones, or a device's moved ones) and enables
    /// Control Point notifications.
    public static func open(client: GATTClient, uuids: SecureDFUUUIDs = .standard) async throws(DFUTransportError)
        -> GATTDFUTransport
    {
        do {
            guard let service = try await client.discoverPrimaryServices(uuid: uuids.service).first else {
                throw DFUTransportError(.rejected, "no Secure DFU service (\(uuids.service))")
            }
            var characteristics = try await client.discoverCharacteristics(of: service)
            guard let cpIndex = characteristics.firstIndex(where: { $0.uuid == uuids.controlPoint }),
                let packet = characteristics.first(where: { $0.uuid == uuids.packet })
            else {
                throw DFUTransportError(.rejected, "Secure DFU service without Control Point or Packet characteristic")
            }
            characteristics[cpIndex].descriptors = try await client.discoverDescriptors(of: characteristics[cpIndex])
            let controlPoint = characteristics[cpIndex]
            let transport = GATTDFUTransport(client: client, controlPoint: controlPoint, packet: packet)
            try await client.setNotifications(true, of: controlPoint)
            return transport
        } catch let error as DFUTransportError {
            throw error
        } catch let error as ATTClientError {
            throw Self.map(error)
        } catch {
            throw DFUTransportError(.rejected, "\(error)")
        }
    }

    public var mtu: Int { get async { await client.att.mtu } }

    public func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError) {
        do {
            try await client.write(handle: controlPoint.valueHandle, value: bytes)
        } catch {
            throw Self.map(error)
        }
    }

    public func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError) {
        do {
            try await client.writeWithoutResponse(handle: packet.valueHandle, value: bytes)
        } catch {
            throw Self.map(error)
        }
    }

    /// The packets as one burst of Write Commands (`GATTClient.writeWithoutResponse(handle:values:)`: one bearer call per burst).
    public func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(DFUTransportError) {
        do {
            try await client.writeWithoutResponse(handle: packet.valueHandle, values: packets)
        } catch {
            throw Self.map(error)
        }
    }

    /// The ATT client's close reason when the device broke ATT (docs/reliability.md, "Lying devices").
    public var peerFault: DFUTransportError? {
        get async {
            guard let reason = await client.att.closeReason,
                [.oversizePDU, .protocolViolation, .decoding].contains(reason.code)
            else { return nil }
            return DFUTransportError(.rejected, reason.reason)
        }
    }

    static func map(_ error: ATTClientError) -> DFUTransportError {
        switch error.code {
        case .disconnected, .closed, .timeout: DFUTransportError(.disconnected, "\(error)")
        default: DFUTransportError(.rejected, "\(error)")
        }
    }
}
