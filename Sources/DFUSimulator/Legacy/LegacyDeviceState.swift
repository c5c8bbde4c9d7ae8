import BLECore
import LegacyDFU

/// A snapshot of a virtual Legacy device, for status files and tests (JSON via Codable, snake_case keys).
public struct LegacyDeviceState: Codable, Sendable, Hashable {
    /// The DFU transfer as the device holds it in RAM.
    public struct Transfer: Codable, Sendable, Hashable {
        /// Bank module state (`dfu_state_t`) or InfiniTime's `States`.
        public var state: String
        /// Image type of the last Start (`m_update_mode`).
        public var updateMode: UInt8
        public var softdeviceSize: UInt32
        public var bootloaderSize: UInt32
        public var applicationSize: UInt32
        /// `m_data_received`.
        public var dataReceived: UInt32
        /// `m_num_of_firmware_bytes_rcvd`: what `07` reports.
        public var bytesAccepted: UInt32
        public var initPacketLength: Int
        public var prnTarget: UInt16
        public var flashQueue: Int

        enum CodingKeys: String, CodingKey {
            case state
            case updateMode = "update_mode"
            case softdeviceSize = "softdevice_size"
            case bootloaderSize = "bootloader_size"
            case applicationSize = "application_size"
            case dataReceived = "data_received"
            case bytesAccepted = "bytes_accepted"
            case initPacketLength = "init_packet_length"
            case prnTarget = "prn_target"
            case flashQueue = "flash_queue"
        }
    }

    public var family: String
    public var kind: LegacyFirmwareKind
    public var mode: LegacyBootTarget
    /// The address the device advertises now.
    public var address: String
    public var addressType: AddressType
    public var name: String
    /// The bootloader advertises directed to the central that jumped (SDK 11 with peer data): no AD data.
    public var directedAdvertising: Bool
    public var installed: InstalledImages
    /// Bank 0 in the settings page.
    public var bank0: LegacyBankCode
    public var softdeviceFWID: UInt16
    public var transfer: Transfer
    public var counters: LegacyDeviceCounters
    public var faults: [FaultRecord]
    public var connected: Bool

    enum CodingKeys: String, CodingKey {
        case family, kind, mode, address, name, installed, transfer, counters, faults, connected
        case addressType = "address_type"
        case directedAdvertising = "directed_advertising"
        case bank0 = "bank_0"
        case softdeviceFWID = "softdevice_fwid"
    }
}

/// What a virtual Legacy device keeps across a power cycle (flash: installed images, the settings page's bank 0,
/// the SoftDevice it runs). Nothing of a transfer survives: Legacy DFU has no resume.
public struct LegacyPersistentState: Codable, Sendable, Hashable {
    public var format: Int
    public var family: String
    public var mode: LegacyBootTarget
    public var installed: InstalledImages
    public var bank0: LegacyBankCode
    public var softdeviceFWID: UInt16
    public var applicationStart: Int

    public init(
        mode: LegacyBootTarget, installed: InstalledImages, bank0: LegacyBankCode, softdeviceFWID: UInt16,
        applicationStart: Int
    ) {
        format = 1
        family = "legacy"
        self.mode = mode
        self.installed = installed
        self.bank0 = bank0
        self.softdeviceFWID = softdeviceFWID
        self.applicationStart = applicationStart
    }

    enum CodingKeys: String, CodingKey {
        case format, family, mode, installed
        case bank0 = "bank_0"
        case softdeviceFWID = "softdevice_fwid"
        case applicationStart = "application_start"
    }
}

extension LegacyBootloader {
    var transferSnapshot: LegacyDeviceState.Transfer {
        LegacyDeviceState.Transfer(
            state: state.rawValue, updateMode: updateMode, softdeviceSize: startSizes.softdevice,
            bootloaderSize: startSizes.bootloader, applicationSize: startSizes.application, dataReceived: dataReceived,
            bytesAccepted: bytesAccepted, initPacketLength: initPacket.count, prnTarget: prnTarget,
            flashQueue: flash.pending.count)
    }

    /// Loads what a power cycle keeps.
    mutating func restore(_ state: LegacyPersistentState) {
        installed = state.installed
        bank0 = state.installed.application == nil ? .invalid : state.bank0
        softDeviceFWID = state.softdeviceFWID
        applicationStart = state.applicationStart
    }
}

extension InfiniTimeDFU {
    var transferSnapshot: LegacyDeviceState.Transfer {
        LegacyDeviceState.Transfer(
            state: state.rawValue, updateMode: state == .idle ? 0 : LegacyImageType.application.rawValue, softdeviceSize: 0,
            bootloaderSize: 0, applicationSize: UInt32(truncatingIfNeeded: applicationSize),
            dataReceived: UInt32(truncatingIfNeeded: bytesReceived), bytesAccepted: UInt32(truncatingIfNeeded: bytesReceived),
            initPacketLength: 0, prnTarget: UInt16(packetsToNotify), flashQueue: 0)
    }
}
