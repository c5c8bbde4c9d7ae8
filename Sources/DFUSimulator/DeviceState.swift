import BLECore

/// A snapshot of a virtual device, for status files and tests (JSON via Codable).
public struct DeviceState: Codable, Sendable, Hashable {
    public struct Settings: Codable, Sendable, Hashable {
        /// A complete init command is stored (received; maybe not executed).
        public var initCommandPresent: Bool
        /// The init command was validated (`m_valid_init_cmd_present`).
        public var initCommandValid: Bool
        public var commandSize: UInt32
        public var commandOffset: UInt32
        public var commandCRC: UInt32
        /// Firmware bytes the init command announces (0 when none).
        public var firmwareSize: UInt32
        public var dataOffset: UInt32
        public var dataCRC: UInt32
        public var offsetLast: UInt32
        public var crcLast: UInt32
        public var prnTarget: UInt16
        /// Queued flash operations.
        public var flashQueue: Int

        enum CodingKeys: String, CodingKey {
            case initCommandPresent = "init_command_present"
            case initCommandValid = "init_command_valid"
            case commandSize = "command_size"
            case commandOffset = "command_offset"
            case commandCRC = "command_crc"
            case firmwareSize = "firmware_size"
            case dataOffset = "data_offset"
            case dataCRC = "data_crc"
            case offsetLast = "offset_last"
            case crcLast = "crc_last"
            case prnTarget = "prn_target"
            case flashQueue = "flash_queue"
        }
    }

    public var mode: DeviceMode
    /// The address the device advertises now ("AA:BB:CC:DD:EE:FF").
    public var address: String
    public var addressType: AddressType
    /// The name the device advertises now.
    public var name: String
    public var installed: InstalledImages
    public var settings: Settings
    public var counters: DeviceCounters
    public var faults: [FaultRecord]
    /// Whether a connection is being served.
    public var connected: Bool

    enum CodingKeys: String, CodingKey {
        case mode, address, name, installed, settings, counters, faults, connected
        case addressType = "address_type"
    }
}

extension BootloaderStateMachine {
    /// The bootloader part of a `DeviceState`.
    public var settingsSnapshot: DeviceState.Settings {
        DeviceState.Settings(
            initCommandPresent: settings.commandSize != 0 && settings.commandOffset == settings.commandSize,
            initCommandValid: initValid, commandSize: settings.commandSize, commandOffset: settings.commandOffset,
            commandCRC: settings.commandCRC, firmwareSize: announcedFirmwareSize(settings) ?? 0,
            dataOffset: settings.firmwareOffset, dataCRC: settings.firmwareCRC, offsetLast: settings.offsetLast,
            crcLast: settings.crcLast, prnTarget: prnTarget, flashQueue: flash.pending.count)
    }
}
