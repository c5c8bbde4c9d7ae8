import ATT
import BLECore
import GATT

/// The SMP characteristic of a connected device, as ``SMPClient`` needs it. ``GATTSMPTransport`` implements it over
/// a `GATTClient`; tests can implement it in memory.
public protocol SMPTransport: Sendable {
    /// Sends one SMP message, split into Write Without Response values of at most ATT_MTU − 3 bytes (Zephyr
    /// reassembles them by the header's length when `MCUMGR_TRANSPORT_BT_REASSEMBLY` is on). Returns when the
    /// link took the last fragment (back-pressure only: Write Commands are never answered).
    func send(_ message: [UInt8]) async throws(SMPError)
    /// The characteristic's notification values, in order; the stream ends when the link goes down.
    var notifications: AsyncStream<[UInt8]> { get }
    /// The ATT_MTU of the link.
    var mtu: Int { get async }
    /// Why the link ended when the device broke ATT (oversize or undecodable PDUs); nil otherwise.
    var peerFault: String? { get async }
    /// Disconnects.
    func close() async
}

/// The SMP service and characteristic (Zephyr `smp_bt.c`; smp-mcuboot.md §5.1).
public enum SMPUUID {
    /// 8D53DC1D-1DB7-4CD3-868B-8A527460AA84
    public static let service = BluetoothUUID(bigEndianBytes: [
        0x8D, 0x53, 0xDC, 0x1D, 0x1D, 0xB7, 0x4C, 0xD3, 0x86, 0x8B, 0x8A, 0x52, 0x74, 0x60, 0xAA, 0x84,
    ]) ?? BluetoothUUID(0x0000)
    /// DA2E7828-FBCE-4E01-AE9E-261174997C48 (Write Without Response, Notify)
    public static let characteristic = BluetoothUUID(bigEndianBytes: [
        0xDA, 0x2E, 0x78, 0x28, 0xFB, 0xCE, 0x4E, 0x01, 0xAE, 0x9E, 0x26, 0x11, 0x74, 0x99, 0x7C, 0x48,
    ]) ?? BluetoothUUID(0x0000)
}

/// ``SMPTransport`` over a `GATTClient`: finds the SMP characteristic, enables its notifications (without them a
/// Zephyr server with `BT_GATT_ENFORCE_SUBSCRIPTION` drops every response, smp-mcuboot.md §5.3) and writes
/// requests as Write Commands (the characteristic declares Write Without Response only).
public struct GATTSMPTransport: SMPTransport {
    public let client: GATTClient
    public let characteristic: GATTCharacteristic
    public let notifications: AsyncStream<[UInt8]>

    public init(client: GATTClient, characteristic: GATTCharacteristic) {
        self.client = client
        self.characteristic = characteristic
        notifications = client.att.notificationValues(handle: characteristic.valueHandle)
    }

    /// Discovers the SMP characteristic and enables its notifications.
    public static func open(client: GATTClient) async throws(SMPError) -> GATTSMPTransport {
        do {
            guard let service = try await client.discoverPrimaryServices(uuid: SMPUUID.service).first else {
                throw SMPError(.notSMP, "no SMP service (\(SMPUUID.service))")
            }
            var characteristics = try await client.discoverCharacteristics(of: service)
            guard let index = characteristics.firstIndex(where: { $0.uuid == SMPUUID.characteristic }) else {
                throw SMPError(.notSMP, "SMP service without the SMP characteristic (\(SMPUUID.characteristic))")
            }
            characteristics[index].descriptors = try await client.discoverDescriptors(of: characteristics[index])
            let transport = GATTSMPTransport(client: client, characteristic: characteristics[index])
            try await client.setNotifications(true, of: characteristics[index])
            return transport
        } catch let error as SMPError {
            throw error
        } catch let error as ATTClientError {
            throw Self.map(error)
        } catch {
            throw SMPError(.disconnected, "\(error)")
        }
    }

    public var mtu: Int { get async { await client.att.mtu } }

    public func send(_ message: [UInt8]) async throws(SMPError) {
        let handle = characteristic.valueHandle
        let fragment = max(await client.att.mtu - 3, 1)
        let pdus = stride(from: 0, to: message.count, by: fragment).map { start in
            ATTPDU.encodeWriteCommand(handle: handle, value: message[start..<min(start + fragment, message.count)])
        }
        do {
            try await client.att.commands(encoded: pdus)
        } catch {
            throw Self.map(error)
        }
    }

    public var peerFault: String? {
        get async {
            guard let reason = await client.att.closeReason,
                [.oversizePDU, .protocolViolation, .decoding].contains(reason.code)
            else { return nil }
            return reason.reason
        }
    }

    public func close() async { await client.att.close() }

    static func map(_ error: ATTClientError) -> SMPError {
        switch error.code {
        case .disconnected, .timeout: SMPError(.disconnected, "\(error)")
        case .closed: SMPError(.closed, "\(error)")
        default: SMPError(.protocolViolation, "\(error)")
        }
    }
}

/// Joins notification values into SMP messages by the header's length (smp-mcuboot.md §5.3: Zephyr splits each
/// response into notifications of ATT_MTU − 3 bytes and sends one response at a time).
public struct SMPReassembler: Sendable {
    private var buffer: [UInt8] = []

    public init() {}

    /// Bytes held for an incomplete message.
    public var pendingCount: Int { buffer.count }

    /// Adds one notification value; returns the messages it completed (their bytes, header included).
    public mutating func append(_ value: [UInt8]) -> [[UInt8]] {
        buffer += value
        var frames: [[UInt8]] = []
        while let length = SMPMessage.frameLength(buffer[...]), buffer.count >= length {
            frames.append(Array(buffer.prefix(length)))
            buffer.removeFirst(length)
        }
        return frames
    }

    public mutating func reset() { buffer = [] }
}
