import BLECore
import DFUProtocol

/// Which buttonless characteristic the application exposes inside FE59.
public enum ButtonlessKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// No buttonless service: the device is only reachable in bootloader mode.
    case none
    /// `8EC90003`: no bonds; the bootloader advertises at address + 1 (LSB, no carry).
    case unbonded
    /// `8EC90004`: bonds shared with the bootloader, which keeps the address.
    case bonded
}

/// A firmware part as installed on a device.
public struct InstalledImage: Codable, Sendable, Hashable {
    /// `fw_version` of the init packet that installed it (the profile's initial value otherwise).
    public var version: UInt32
    /// Image size in bytes (0 when unknown).
    public var size: UInt32
    /// SHA-256 of the image, lowercase hex, in natural byte order (empty when unknown).
    public var sha256: String

    public init(version: UInt32, size: UInt32 = 0, sha256: String = "") {
        self.version = version
        self.size = size
        self.sha256 = sha256
    }
}

/// What is installed per part.
public struct InstalledImages: Codable, Sendable, Hashable {
    public var application: InstalledImage?
    public var bootloader: InstalledImage
    public var softdevice: InstalledImage?
    public init(application: InstalledImage?, bootloader: InstalledImage, softdevice: InstalledImage?) {
        self.application = application
        self.bootloader = bootloader
        self.softdevice = softdevice
    }
}

/// The radio link as the device sees it (linux-ble.md §4). Durations are in microseconds / milliseconds as named.
public struct LinkParameters: Codable, Sendable, Hashable {
    /// "1M" or "2M".
    public var phy: String
    /// LL data length (payload bytes per LL data PDU), 27...251.
    public var llDataLength: Int
    /// The largest ATT MTU the device accepts.
    public var maxMTU: Int
    /// Connection interval in milliseconds (7.5...4000).
    public var connectionIntervalMs: Double
    /// LL data PDUs the controllers exchange per connection event (the central's or peripheral's cap).
    public var packetsPerEvent: Int
    /// Connection events between a Write Request and its Write Response (1 best case, usually 2).
    public var writeResponseLatencyEvents: Int
    /// Receive buffers of the DFU transport (`MAX_DFU_BUFFERS`); a Packet write that finds none free is dropped.
    public var receiveBuffers: Int
    /// Encrypted link (adds the 4-byte MIC to each non-empty LL PDU).
    public var encrypted: Bool

    enum CodingKeys: String, CodingKey {
        case phy
        case llDataLength = "ll_data_length"
        case maxMTU = "max_mtu"
        case connectionIntervalMs = "connection_interval_ms"
        case packetsPerEvent = "packets_per_event"
        case writeResponseLatencyEvents = "write_response_latency_events"
        case receiveBuffers = "receive_buffers"
        case encrypted
    }

    public init(
        phy: String = "1M", llDataLength: Int = 27, maxMTU: Int = 247, connectionIntervalMs: Double = 30,
        packetsPerEvent: Int = 6, writeResponseLatencyEvents: Int = 2, receiveBuffers: Int = 17, encrypted: Bool = false
    ) {
        self.phy = phy
        self.llDataLength = llDataLength
        self.maxMTU = maxMTU
        self.connectionIntervalMs = connectionIntervalMs
        self.packetsPerEvent = packetsPerEvent
        self.writeResponseLatencyEvents = writeResponseLatencyEvents
        self.receiveBuffers = receiveBuffers
        self.encrypted = encrypted
    }
}

/// The device's flash (linux-ble.md §4.6).
public struct FlashParameters: Codable, Sendable, Hashable {
    public var pageSize: Int
    /// Time to erase one page, microseconds.
    public var pageEraseMicros: Double
    /// Time to write one 32-bit word, microseconds.
    public var wordWriteMicros: Double
    /// Flash operations that may be queued (`nrf_fstorage` queue); a Packet write that finds it full is dropped
    /// silently but still counts toward the PRN.
    public var queueDepth: Int
    /// The largest update the free bank holds (dual bank), bytes.
    public var bankSize: Int
    /// Single-bank updates (`NRF_DFU_SINGLE_BANK_APP_UPDATES`, the image written over the application): a device that
    /// loses power during an update stays in the bootloader. Absent or false: dual bank, the old application stays
    /// valid until the new image is activated, and a device that loses power boots it (`dfu_enter_check`).
    public var singleBank: Bool?

    enum CodingKeys: String, CodingKey {
        case pageSize = "page_size"
        case pageEraseMicros = "page_erase_us"
        case wordWriteMicros = "word_write_us"
        case queueDepth = "queue_depth"
        case bankSize = "bank_size"
        case singleBank = "single_bank"
    }

    public init(
        pageSize: Int = 4096, pageEraseMicros: Double = 85_000, wordWriteMicros: Double = 41, queueDepth: Int = 4,
        bankSize: Int = 200_704
    ) {
        self.pageSize = pageSize
        self.pageEraseMicros = pageEraseMicros
        self.wordWriteMicros = wordWriteMicros
        self.queueDepth = queueDepth
        self.bankSize = bankSize
    }
}

/// A virtual device model (Firmware/*.json). Every field can be overridden before the device is made.
public struct DeviceProfile: Codable, Sendable, Hashable {
    /// Advertised name in application mode.
    public var name: String
    /// Chip class, informational ("nRF52832").
    public var chip: String
    /// nRF5 SDK version of the bootloader ("15.3.0"); a major version below 15 gives 256-byte command objects.
    public var sdkVersion: String
    /// Identity address in application mode.
    public var address: BluetoothAddress
    public var addressType: AddressType
    /// `NRF_DFU_HW_VERSION`, compared with the init packet's `hw_version`.
    public var hwVersion: UInt32
    /// The Hardware Revision string the application publishes in its Device Information (`hardware_revision`):
    /// nil (the default) publishes `hw_version` in decimal; an empty string publishes none (a device that does not
    /// tell it).
    public var hardwareRevision: String?
    /// FWID of the installed SoftDevice (e.g. 0xB7 = S132 6.1.1, 0x0100 = S140 7.2.0), matched against `sd_req`.
    public var softDeviceFWID: UInt16
    public var buttonless: ButtonlessKind
    /// `NRF_DFU_SAVE_PROGRESS_IN_FLASH`: data progress survives a disconnect.
    public var saveProgress: Bool
    /// `NRF_DFU_PROTOCOL_REDUCED`: opcodes 0x00, 0x07, 0x09, 0x0A, 0x0B answer 0x02.
    public var protocolReduced: Bool
    /// `NRF_DFU_REQUIRE_SIGNED_APP_UPDATE` (bootloader and SoftDevice updates always need a signature when keys exist).
    public var requireSignedApp: Bool
    /// Accepted ECDSA P-256 public keys (PEM). Empty: no signature is required or checked.
    public var publicKeys: [String]
    public var installed: InstalledImages
    public var link: LinkParameters
    public var flash: FlashParameters
    /// Divides every modelled duration (air time, flash time). 1 = real time.
    public var speedup: Double
    /// The DFU service and characteristic UUIDs when the vendor moved them (`dfu_uuids`; nil: the standard FE59
    /// and 8EC9000x ones).
    public var uuids: SecureDFUUUIDs?

    /// The UUIDs the device serves.
    public var dfuUUIDs: SecureDFUUUIDs { uuids ?? .standard }

    enum CodingKeys: String, CodingKey {
        case name, chip, address, buttonless, installed, link, flash, speedup
        case uuids = "dfu_uuids"
        case sdkVersion = "sdk_version"
        case addressType = "address_type"
        case hwVersion = "hw_version"
        case hardwareRevision = "hardware_revision"
        case softDeviceFWID = "softdevice_fwid"
        case saveProgress = "save_progress"
        case protocolReduced = "protocol_reduced"
        case requireSignedApp = "require_signed_app"
        case publicKeys = "public_keys"
    }

    public init(
        name: String, chip: String = "nRF52832", sdkVersion: String = "15.3.0", address: BluetoothAddress,
        addressType: AddressType = .random, hwVersion: UInt32 = 52, softDeviceFWID: UInt16 = 0xB7,
        buttonless: ButtonlessKind = .unbonded, saveProgress: Bool = false, protocolReduced: Bool = false,
        requireSignedApp: Bool = true, publicKeys: [String] = [],
        installed: InstalledImages = InstalledImages(
            application: InstalledImage(version: 1), bootloader: InstalledImage(version: 1), softdevice: nil),
        link: LinkParameters = LinkParameters(), flash: FlashParameters = FlashParameters(), speedup: Double = 1,
        uuids: SecureDFUUUIDs? = nil
    ) {
        self.name = name
        self.chip = chip
        self.sdkVersion = sdkVersion
        self.address = address
        self.addressType = addressType
        self.hwVersion = hwVersion
        self.softDeviceFWID = softDeviceFWID
        self.buttonless = buttonless
        self.saveProgress = saveProgress
        self.protocolReduced = protocolReduced
        self.requireSignedApp = requireSignedApp
        self.publicKeys = publicKeys
        self.installed = installed
        self.link = link
        self.flash = flash
        self.speedup = speedup
        self.uuids = uuids
    }

    /// `INIT_COMMAND_MAX_SIZE`: 256 for SDK 12-14 (settings v1), 512 from SDK 15.
    public var commandObjectMaxSize: Int { sdk.major < 15 ? 256 : 512 }

    /// `NRF_DFU_BLE_REQUIRES_BONDS`: the bonded buttonless variant goes with a bootloader that keeps the bond, and
    /// both need an encrypted link for their writes (docs/simulator.md, "Bonds").
    public var requiresBonds: Bool { buttonless == .bonded }

    /// The bootloader's SDK version, for the behaviours that differ between versions.
    public var sdk: SDKVersion { SDKVersion(sdkVersion) }

    /// `DATA_OBJECT_MAX_SIZE` (= the code page size on nRF52).
    public var dataObjectMaxSize: Int { flash.pageSize }

    /// Largest bootloader image the device accepts (`BOOTLOADER_SIZE`).
    public static let bootloaderMaxSize = 0x8000

    /// A duration of `micros` microseconds, divided by `speedup`.
    func scaled(micros: Double) -> Duration {
        let factor = speedup > 0 ? speedup : 1
        return .nanoseconds(Int64((micros * 1000 / factor).rounded()))
    }
}

/// An nRF5 SDK version ("15.3.0") and what the bootloader sources of that version do differently.
public struct SDKVersion: Sendable, Hashable, Comparable {
    public var major: Int
    public var minor: Int

    /// An unparsable major version counts as 15, a missing or unparsable minor as 0.
    public init(_ text: String) {
        let parts = text.split(separator: ".").map { Int($0) }
        major = parts.first.flatMap { $0 } ?? 15
        minor = parts.count > 1 ? (parts[1] ?? 0) : 0
    }

    public static func < (lhs: SDKVersion, rhs: SDKVersion) -> Bool {
        (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
    }

    /// SDK 16.0 and later reload the settings from flash when the link drops: `nrf_bootloader.c dfu_observer` calls
    /// `nrf_dfu_settings_reinit()` on `NRF_DFU_EVT_TRANSPORT_DEACTIVATED`. SDK 15.0 and 15.3 have no such case: the
    /// RAM state (a created object, a partly written one) outlives the link until a reset.
    public var reloadsSettingsOnDisconnect: Bool { major >= 16 }

    /// SDK 15.3 and later keep a backup of the settings page and write both (`nrf_dfu_settings_write_and_backup`);
    /// 15.0 writes the settings page alone (15.1 and 15.2 were not read; counted with 15.0).
    public var hasSettingsBackup: Bool { self >= SDKVersion("15.3") }
}
