import ATT
import BLECore
import GATT

/// The Legacy DFU characteristics of a connected device, as the engine needs them. The GATT adapter
/// (``GATTLegacyTransport``) implements it over a `GATTClient`; tests may implement it in memory.
public protocol LegacyDFUTransport: Sendable {
    /// Write Request to the Control Point (returns when the device acknowledged the write).
    func writeControlPoint(_ bytes: [UInt8]) async throws(LegacyTransportError)
    /// One Write Command to the Packet characteristic (returns when the bearer took it: back-pressure only).
    func writePacket(_ bytes: [UInt8]) async throws(LegacyTransportError)
    /// Write Commands to the Packet characteristic, in order and with nothing between them.
    func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(LegacyTransportError)
    /// Control Point notifications; the stream ends when the link goes down.
    var controlPointNotifications: AsyncStream<[UInt8]> { get }
}

extension LegacyDFUTransport {
    public func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(LegacyTransportError) {
        for packet in packets { try await writePacket(Array(packet)) }
    }
}

/// A transport write failed.
public struct LegacyTransportError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let disconnected = Code(rawValue: "disconnected")
        public static let rejected = Code(rawValue: "rejected")
        /// The device has no Legacy DFU service (or it lacks a characteristic).
        public static let notLegacy = Code(rawValue: "not-legacy")
        public var description: String { rawValue }
    }

    public var code: Code
    public var reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// One line for people (``CodedError/message``).
    public var message: String { reason }
}

/// ``LegacyDFUTransport`` over a `GATTClient`: finds the DFU service (`…1530`) with its Control Point (`…1531`), Packet
/// (`…1532`) and, when present, DFU Version (`…1534`), reads the version, and enables Control Point notifications
/// (without them an SDK bootloader refuses Control Point writes with ATT 0xFD).
public struct GATTLegacyTransport: LegacyDFUTransport {
    public let client: GATTClient
    public let controlPoint: GATTCharacteristic
    public let packet: GATTCharacteristic?
    /// The DFU Version value; nil when the device has no such characteristic (SDK ≤ 6.1).
    public let version: LegacyDFUVersion?
    /// Every primary service of the device (for ``LegacyDetection``).
    public let services: [GATTService]
    public let controlPointNotifications: AsyncStream<[UInt8]>

    init(client: GATTClient, controlPoint: GATTCharacteristic, packet: GATTCharacteristic?, version: LegacyDFUVersion?, services: [GATTService]) {
        self.client = client
        self.controlPoint = controlPoint
        self.packet = packet
        self.version = version
        self.services = services
        controlPointNotifications = client.att.notificationValues(handle: controlPoint.valueHandle)
    }

    /// Discovers the service, reads the DFU Version and enables Control Point notifications.
    public static func open(client: GATTClient) async throws(LegacyTransportError) -> GATTLegacyTransport {
        do {
            let services = try await client.discoverPrimaryServices()
            guard let service = services.first(where: { $0.uuid == LegacyDFUUUID.service }) else {
                throw LegacyTransportError(.notLegacy, "no Legacy DFU service (00001530-1212-EFDE-1523-785FEABCD123)")
            }
            var characteristics = try await client.discoverCharacteristics(of: service)
            guard let cpIndex = characteristics.firstIndex(where: { $0.uuid == LegacyDFUUUID.controlPoint }) else {
                throw LegacyTransportError(.notLegacy, "Legacy DFU service without a Control Point (…1531)")
            }
            characteristics[cpIndex].descriptors = try await client.discoverDescriptors(of: characteristics[cpIndex])
            var version: LegacyDFUVersion?
            if let characteristic = characteristics.first(where: { $0.uuid == LegacyDFUUUID.version }) {
                let bytes = try await client.read(handle: characteristic.valueHandle)
                do {
                    version = try LegacyDFUVersion(decoding: bytes)
                } catch {
                    throw LegacyTransportError(.rejected, "DFU Version characteristic holds \(bytes.count) byte(s): \(error)")
                }
            }
            let transport = GATTLegacyTransport(
                client: client, controlPoint: characteristics[cpIndex],
                packet: characteristics.first { $0.uuid == LegacyDFUUUID.packet }, version: version, services: services)
            try await client.setNotifications(true, of: characteristics[cpIndex])
            return transport
        } catch let error as LegacyTransportError {
            throw error
        } catch let error as ATTClientError {
            throw Self.map(error)
        } catch {
            throw LegacyTransportError(.rejected, "\(error)")
        }
    }

    public func writeControlPoint(_ bytes: [UInt8]) async throws(LegacyTransportError) {
        do {
            try await client.write(handle: controlPoint.valueHandle, value: bytes)
        } catch {
            throw Self.map(error)
        }
    }

    public func writePacket(_ bytes: [UInt8]) async throws(LegacyTransportError) {
        try await writePackets([bytes[...]])
    }

    /// The packets as one burst of Write Commands (`GATTClient.writeWithoutResponse(handle:values:)`).
    public func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(LegacyTransportError) {
        guard let packet else { throw LegacyTransportError(.notLegacy, "Legacy DFU service without a Packet characteristic (…1532)") }
        do {
            try await client.writeWithoutResponse(handle: packet.valueHandle, values: packets)
        } catch {
            throw Self.map(error)
        }
    }

    static func map(_ error: ATTClientError) -> LegacyTransportError {
        switch error.code {
        case .disconnected, .closed, .timeout: LegacyTransportError(.disconnected, "\(error)")
        default: LegacyTransportError(.rejected, "\(error)")
        }
    }
}
