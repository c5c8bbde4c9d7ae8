import ATT
import BLECore

/// Which firmware the device runs.
public enum DeviceMode: String, Codable, Sendable, Hashable {
    case application = "app"
    case bootloader
}

/// What the bootloader is told (one event per ATT write or link event).
public enum BootloaderEvent: Sendable, Hashable {
    /// A write to the DFU Control Point (8EC90001); `cccdEnabled` is the CCCD state of that characteristic.
    case controlPointWrite([UInt8], cccdEnabled: Bool)
    /// A write to the DFU Packet (8EC90002); `withResponse` for a Write Request (refused), false for a Write Command.
    case packetWrite([UInt8], withResponse: Bool)
    /// The link dropped (`NRF_DFU_EVT_TRANSPORT_DEACTIVATED`): settings are reloaded from flash.
    case disconnected
    /// Power loss: queued flash operations and RAM are lost.
    case powerLoss
    /// A reset with the queue drained.
    case reset
}

/// What the bootloader does in answer, in order.
public enum BootloaderAction: Sendable, Hashable {
    /// Send a Handle Value Notification on the Control Point.
    case notify([UInt8])
    /// Refuse the ATT write with this error (Write Request only; a Write Command is simply ignored).
    case attError(ATTErrorCode)
    /// A flash operation was queued (for traces).
    case flash(FlashOperation)
    /// Hold the next action this long (the bootloader waits for its flash queue).
    case wait(Duration)
    /// Drop the link; the device stays in its mode.
    case disconnect
    /// Drop the link and restart in `mode` (Abort, power loss).
    case reboot(into: DeviceMode)
    /// The update is complete: the settings are being written (`flashTime`, the link stays up); then the device drops
    /// the link and restarts in `mode` (`on_dfu_complete`).
    case resetAfterFlash(Duration, into: DeviceMode)
    /// A fault fired.
    case fault(FaultRecord)
}

/// The bootloader's settings page (`nrf_dfu_settings_t`, the parts that matter on the wire).
public struct BootloaderSettings: Sendable, Hashable, Codable {
    /// `progress.command_size`: the size given in the last Create Command.
    public var commandSize: UInt32 = 0
    /// `progress.command_offset` / `command_crc`: init bytes received so far and their CRC-32.
    public var commandOffset: UInt32 = 0
    public var commandCRC: UInt32 = 0
    /// `init_command`: the received init packet bytes.
    public var initCommand: [UInt8] = []
    /// `progress.data_object_size`: the size given in the last Create Data.
    public var dataObjectSize: UInt32 = 0
    /// `progress.firmware_image_offset` / `firmware_image_crc`: current offset and running CRC.
    public var firmwareOffset: UInt32 = 0
    public var firmwareCRC: UInt32 = 0
    /// `progress.firmware_image_offset_last` / `firmware_image_crc_last`: as of the last executed object.
    public var offsetLast: UInt32 = 0
    public var crcLast: UInt32 = 0

    public init() {}

    enum CodingKeys: String, CodingKey {
        case commandSize = "command_size"
        case commandOffset = "command_offset"
        case commandCRC = "command_crc"
        case initCommand = "init_command"
        case dataObjectSize = "data_object_size"
        case firmwareOffset = "firmware_offset"
        case firmwareCRC = "firmware_crc"
        case offsetLast = "offset_last"
        case crcLast = "crc_last"
    }
}

/// Counters of one device (kept across connections).
public struct DeviceCounters: Codable, Sendable, Hashable {
    public var connections: Int = 0
    public var controlPointWrites: Int = 0
    public var packetsReceived: Int = 0
    /// Packet writes dropped (no receive buffer, flash queue full, drop-rate fault).
    public var packetsDropped: Int = 0
    public var bytesReceived: UInt64 = 0
    public var prnsSent: Int = 0
    /// Create Data requests refused with 0x05 because the flash queue was full.
    public var createsRefused: Int = 0
    public var faultsFired: Int = 0
    public var updatesCompleted: Int = 0

    public init() {}

    enum CodingKeys: String, CodingKey {
        case connections
        case controlPointWrites = "control_point_writes"
        case packetsReceived = "packets_received"
        case packetsDropped = "packets_dropped"
        case bytesReceived = "bytes_received"
        case prnsSent = "prns_sent"
        case createsRefused = "creates_refused"
        case faultsFired = "faults_fired"
        case updatesCompleted = "updates_completed"
    }

    /// Status files written before `creates_refused` existed decode with 0.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        connections = try c.decode(Int.self, forKey: .connections)
        controlPointWrites = try c.decode(Int.self, forKey: .controlPointWrites)
        packetsReceived = try c.decode(Int.self, forKey: .packetsReceived)
        packetsDropped = try c.decode(Int.self, forKey: .packetsDropped)
        bytesReceived = try c.decode(UInt64.self, forKey: .bytesReceived)
        prnsSent = try c.decode(Int.self, forKey: .prnsSent)
        createsRefused = try c.decodeIfPresent(Int.self, forKey: .createsRefused) ?? 0
        faultsFired = try c.decode(Int.self, forKey: .faultsFired)
        updatesCompleted = try c.decode(Int.self, forKey: .updatesCompleted)
    }
}
