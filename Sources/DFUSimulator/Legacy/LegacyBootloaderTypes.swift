import ATT
import BLECore

/// `dfu_state_t` of the bank module (`dfu_bank_internal.h`).
public enum LegacyBankState: String, Codable, Sendable, Hashable {
    case idle
    /// Erasing after Start; `10 01 01` when the erase completes.
    case preparing
    case ready
    case receivingInit = "rx_init_pkt"
    case receivingData = "rx_data_pkt"
    case validating = "validate"
    case waitingForActivate = "wait_4_activate"
}

/// What the settings page says about bank 0 (`bootloader_types.h`: BANK_VALID_APP 0x01, BANK_VALID_SD 0xA5,
/// BANK_INVALID_APP 0xFF).
public enum LegacyBankCode: String, Codable, Sendable, Hashable {
    case validApp = "valid_app"
    case validSoftDevice = "valid_sd"
    case invalid
}

/// What the transport expects on the Packet characteristic (`pkt_type_t`).
enum LegacyPacketType: String, Sendable, Hashable {
    case invalid, start, initPacket = "init", firmwareData = "data"
}

/// What the Legacy bootloader is told.
public enum LegacyBootloaderEvent: Sendable, Hashable {
    case connected
    /// A write to the Control Point (`…1531`); `cccdEnabled` is its CCCD state.
    case controlPointWrite([UInt8], cccdEnabled: Bool)
    /// A write to the Packet characteristic (`…1532`); `withResponse` for a Write Request.
    case packetWrite([UInt8], withResponse: Bool)
    /// Device time passed: flash operations complete, timers expire.
    case tick
    case disconnected
    /// Power loss: queued flash operations and RAM are lost; the device boots again.
    case powerLoss
}

/// Where a device goes after a reset.
public enum LegacyBootTarget: String, Codable, Sendable, Hashable {
    case application = "app"
    case bootloader
}

/// What the bootloader does in answer, in order.
public enum LegacyBootloaderAction: Sendable, Hashable {
    case notify([UInt8])
    /// Refuse the ATT write (Write Request) with this error.
    case attError(ATTErrorCode)
    /// Hold everything this long (a busy-wait in the event handler: Adafruit waiting for a flash slot).
    case wait(Duration)
    /// Deliver ``LegacyBootloaderEvent/tick`` at this device time (a flash completion or timer is due).
    case wake(at: Duration)
    /// Drop the link; the device stays in the bootloader.
    case disconnect
    /// Drop the link and boot into `target` (Activate, Reset, the inactivity timeout).
    case reboot(into: LegacyBootTarget)
    case fault(FaultRecord)
}

/// Counters of one Legacy device (kept across connections).
public struct LegacyDeviceCounters: Codable, Sendable, Hashable {
    public var connections = 0
    public var controlPointWrites = 0
    public var packetsReceived = 0
    /// Packets refused with `10 03 06` (no receive buffer, flash queue full).
    public var packetsRefused = 0
    /// Packets dropped silently (longer than the characteristic allows, drop-rate fault).
    public var packetsDropped = 0
    public var bytesReceived: UInt64 = 0
    public var prnsSent = 0
    public var faultsFired = 0
    public var updatesCompleted = 0
    public var resets = 0

    public init() {}

    enum CodingKeys: String, CodingKey {
        case connections, resets
        case controlPointWrites = "control_point_writes"
        case packetsReceived = "packets_received"
        case packetsRefused = "packets_refused"
        case packetsDropped = "packets_dropped"
        case bytesReceived = "bytes_received"
        case prnsSent = "prns_sent"
        case faultsFired = "faults_fired"
        case updatesCompleted = "updates_completed"
    }
}
