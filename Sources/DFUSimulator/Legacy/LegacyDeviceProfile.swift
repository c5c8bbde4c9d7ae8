import BLECore

/// Which Legacy DFU firmware a virtual device runs (legacy-dfu.md §1, §10, §11).
public enum LegacyFirmwareKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// The nRF5 SDK 11 BLE bootloader (`examples/dfu/bootloader`, `dfu_transport_ble.c`), dual or single bank;
    /// also the SDK 7–10 bootloaders, which speak the same protocol.
    case sdk11
    /// The Adafruit nRF52 bootloader (adafruit/Adafruit_nRF52_Bootloader, its modified SDK 11 copy in `lib/sdk11`).
    case adafruit
    /// An SDK ≤ 6.1 bootloader: no DFU Version characteristic, a bare `02` and a 2-byte CRC init packet.
    case sdk6
    /// InfiniTime (PineTime): the DFU service inside the application (`DfuService.cpp`), image to SPI NOR.
    case infinitime
}

/// Where things sit in the device's flash (SDK 11 `dfu_types.h`, legacy-dfu.md §4), addresses in bytes.
public struct LegacyFlashLayout: Codable, Sendable, Hashable {
    public var pageSize: Int
    /// `BOOTLOADER_REGION_START`.
    public var bootloaderStart: Int
    /// `DFU_APP_DATA_RESERVED`: pages kept for application data below the bootloader (Adafruit: 7 or 10).
    public var appDataReservedPages: Int
    /// `DFU_BL_IMAGE_MAX_SIZE`.
    public var bootloaderMaxSize: Int

    enum CodingKeys: String, CodingKey {
        case pageSize = "page_size"
        case bootloaderStart = "bootloader_start"
        case appDataReservedPages = "app_data_reserved_pages"
        case bootloaderMaxSize = "bootloader_max_size"
    }

    public init(pageSize: Int, bootloaderStart: Int, appDataReservedPages: Int = 0, bootloaderMaxSize: Int) {
        self.pageSize = pageSize
        self.bootloaderStart = bootloaderStart
        self.appDataReservedPages = appDataReservedPages
        self.bootloaderMaxSize = bootloaderMaxSize
    }

    /// `DFU_IMAGE_MAX_SIZE_FULL` for an application that starts at `appStart` (the end of the SoftDevice).
    public func fullSize(appStart: Int) -> Int { max(0, bootloaderStart - appStart - appDataReservedPages * pageSize) }

    /// `DFU_IMAGE_MAX_SIZE_BANKED`: half of FULL, rounded down to two pages.
    public func bankedSize(appStart: Int) -> Int {
        let full = fullSize(appStart: appStart)
        return (full - full % (2 * max(pageSize, 1))) / 2
    }
}

/// A virtual Legacy DFU device (Firmware/*.json with `"family": "legacy"`).
public struct LegacyDeviceProfile: Codable, Sendable, Hashable {
    /// Always "legacy": how `bledfu simulate` tells these profiles from Secure DFU ones.
    public var family: String
    public var kind: LegacyFirmwareKind
    /// Advertised name in application mode ("Nordic_HRM", "InfiniTime").
    public var name: String
    public var chip: String
    /// The SDK or version the bootloader comes from ("11.0.0"; Adafruit: the commit modelled, "48a149f"), informational
    /// (Adafruit's Device Information firmware revision shows it).
    public var sdkVersion: String
    /// Identity address in application mode.
    public var address: BluetoothAddress
    public var addressType: AddressType
    /// The bootloader's advertised name (`DfuTarg`, Adafruit `AdaDFU`).
    public var bootloaderName: String
    /// Dual bank (SDK 11 BLE examples) keeps the old application until Activate; single bank (Adafruit's default)
    /// erases it at Start.
    public var dualBank: Bool
    /// `DFU_REVISION` of the bootloader's DFU Version characteristic; nil: no such characteristic (SDK ≤ 6.1).
    public var dfuVersion: UInt16?
    /// The application offers the buttonless entry (DFU service with DFU Version 0x0001).
    public var applicationDFU: Bool
    /// The application hands the peer's address and keys to the bootloader on the jump (`dfu_ble_peer_data_set`):
    /// the bootloader then keeps the same address; without, it advertises at address + 1.
    public var peerDataHandover: Bool
    /// SDK 11: the device type in UICR (0xFFFF: not checked). Adafruit: ignored (always 0x0052).
    public var deviceType: UInt16
    /// SDK 11: the device revision in UICR (0xFFFF: not checked). Adafruit: `ADAFRUIT_DEV_REV` (0xADAF nRF52832,
    /// 52833, 52840), checked for SoftDevice and bootloader updates.
    public var deviceRevision: UInt16
    /// FWID of the installed SoftDevice (`SD_FWID_GET`), matched against the init packet's list.
    public var softDeviceFWID: UInt16
    /// Where the application starts: the end of the SoftDevice (`SD_SIZE_GET`).
    public var applicationStart: Int
    public var layout: LegacyFlashLayout
    /// RX buffers of the transport (`hci_mem_pool`: 8 × 32 bytes in SDK 11, 16 × 600 in Adafruit's).
    public var receiveBuffers: Int
    public var receiveBufferSize: Int
    /// `m_init_packet[]`: 128 bytes (dual bank, Adafruit), 64 (SDK 11 single bank).
    public var initPacketCapacity: Int
    /// The bootloader built with SDK 11's `experimental/dfu_init_template_signing.c` instead of
    /// `dfu_init_template.c`: the public key it holds (`Qx` ‖ `Qy`, 64 bytes, as hex), against which it checks a
    /// dfu_version 0.8 init packet's ECDSA P-256 signature, then the image's length and SHA-256 at Validate. Nil: the
    /// plain template (a CRC-16). ``sdk11SigningTemplateKey`` is the key the SDK's template holds.
    public var initSigningKey: String?
    /// Flash timing and the pstorage queue (`PSTORAGE_CMD_QUEUE_SIZE`: 10 in SDK 11, 18 in Adafruit's);
    /// `bank_size` is not used (the layout decides).
    public var flash: FlashParameters
    /// `DFU_TIMEOUT_INTERVAL`: 120 s (SDK 11), 360 s (Adafruit); InfiniTime ≈ 9.77 s (10 000 ticks at 1024 Hz).
    public var inactivityTimeoutSeconds: Double
    public var link: LinkParameters
    public var installed: InstalledImages
    /// InfiniTime's "DFU and file system access" setting; off: every DFU access gets ATT 0x08.
    public var dfuEnabled: Bool
    /// Divides every modelled duration (air time, flash time, timers). 1 = real time.
    public var speedup: Double

    enum CodingKeys: String, CodingKey {
        case family, kind, name, chip, address, layout, flash, link, installed, speedup
        case sdkVersion = "sdk_version"
        case addressType = "address_type"
        case bootloaderName = "bootloader_name"
        case dualBank = "dual_bank"
        case dfuVersion = "dfu_version"
        case applicationDFU = "application_dfu"
        case peerDataHandover = "peer_data_handover"
        case deviceType = "device_type"
        case deviceRevision = "device_revision"
        case softDeviceFWID = "softdevice_fwid"
        case applicationStart = "application_start"
        case receiveBuffers = "receive_buffers"
        case receiveBufferSize = "receive_buffer_size"
        case initPacketCapacity = "init_packet_capacity"
        case initSigningKey = "init_signing_key"
        case inactivityTimeoutSeconds = "inactivity_timeout_s"
        case dfuEnabled = "dfu_enabled"
    }

    public init(
        kind: LegacyFirmwareKind, name: String, chip: String, sdkVersion: String, address: BluetoothAddress,
        addressType: AddressType = .random, bootloaderName: String = "DfuTarg", dualBank: Bool = true,
        dfuVersion: UInt16? = 0x0008, applicationDFU: Bool = true, peerDataHandover: Bool = true,
        deviceType: UInt16 = 0xFFFF, deviceRevision: UInt16 = 0xFFFF, softDeviceFWID: UInt16, applicationStart: Int,
        layout: LegacyFlashLayout, receiveBuffers: Int = 8, receiveBufferSize: Int = 32, initPacketCapacity: Int = 128,
        flash: FlashParameters, inactivityTimeoutSeconds: Double = 120, link: LinkParameters,
        installed: InstalledImages, dfuEnabled: Bool = true, speedup: Double = 1, initSigningKey: String? = nil
    ) {
        self.initSigningKey = initSigningKey
        self.family = "legacy"
        self.kind = kind
        self.name = name
        self.chip = chip
        self.sdkVersion = sdkVersion
        self.address = address
        self.addressType = addressType
        self.bootloaderName = bootloaderName
        self.dualBank = dualBank
        self.dfuVersion = dfuVersion
        self.applicationDFU = applicationDFU
        self.peerDataHandover = peerDataHandover
        self.deviceType = deviceType
        self.deviceRevision = deviceRevision
        self.softDeviceFWID = softDeviceFWID
        self.applicationStart = applicationStart
        self.layout = layout
        self.receiveBuffers = receiveBuffers
        self.receiveBufferSize = receiveBufferSize
        self.initPacketCapacity = initPacketCapacity
        self.flash = flash
        self.inactivityTimeoutSeconds = inactivityTimeoutSeconds
        self.link = link
        self.installed = installed
        self.dfuEnabled = dfuEnabled
        self.speedup = speedup
    }

    /// The longest Packet write the device takes: 20 (`MAX_DFU_PKT_LEN`) unless the link's MTU is larger and the
    /// firmware sizes the characteristic from it (Adafruit since d28c2e0: MTU − 3, MTU rounded down to 4 + 3).
    /// InfiniTime declares no limit but asserts 20 (``LegacyFirmwareKind/infinitime``).
    public var packetMaxLength: Int {
        guard kind == .adafruit, link.maxMTU > 23 else { return 20 }
        return (min(link.maxMTU, 247) - 3) & ~3
    }

    /// `DFU_TIMEOUT_INTERVAL`, in real time.
    var inactivityTimeout: Duration { timer(micros: inactivityTimeoutSeconds * 1_000_000) }

    /// A protocol timer of `micros` microseconds. The speedup divides the work (air time, flash, processing), not the
    /// timers a host must beat: a watch that resets its DFU service after 10 s without an access keeps doing so at
    /// any speedup (divided by 100 it would outrun the host's own scheduling).
    func timer(micros: Double) -> Duration { .nanoseconds(Int64((micros * 1000).rounded())) }

    /// A duration of `micros` microseconds, divided by `speedup`.
    func scaled(micros: Double) -> Duration {
        let factor = speedup > 0 ? speedup : 1
        return .nanoseconds(Int64((micros * 1000 / factor).rounded()))
    }
}
