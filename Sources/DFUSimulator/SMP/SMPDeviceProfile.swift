import BLECore

/// The SMP server's build options (Zephyr Kconfig; smp-mcuboot.md §2, §5.4).
public struct SMPServerOptions: Codable, Sendable, Hashable {
    /// `MCUMGR_TRANSPORT_NETBUF_SIZE` (384 by default, 2475 in the smp_svr BLE overlay).
    public var bufferSize: Int
    /// `MCUMGR_TRANSPORT_NETBUF_COUNT` (4): requests and responses share them.
    public var bufferCount: Int
    /// `MCUMGR_TRANSPORT_BT_REASSEMBLY`: a request may span several writes.
    public var reassembly: Bool
    /// `MCUMGR_GRP_OS_MCUMGR_PARAMS` (off by default: ENOTSUP).
    public var mcumgrParameters: Bool
    /// `MCUMGR_GRP_OS_BOOTLOADER_INFO` (off by default).
    public var bootloaderInfo: Bool
    /// `MCUMGR_SMP_SUPPORT_ORIGINAL_PROTOCOL` is always on here; false makes the server answer v1 only (old trees).
    public var smpV2: Bool
    /// `IMG_ENABLE_IMAGE_CHECK`: `match` in the last upload answer.
    public var imageCheck: Bool
    /// `IMG_ERASE_PROGRESSIVELY`: erase pages as writes reach them instead of on the first chunk.
    public var eraseProgressively: Bool
    /// zcbor without `ZCBOR_CANONICAL` writes indefinite-length maps and arrays (the default).
    public var indefiniteCBOR: Bool
    /// `MCUMGR_GRP_OS_RESET_MS`: delay between the reset answer and the reset.
    public var resetDelayMs: Double

    enum CodingKeys: String, CodingKey {
        case reassembly
        case bufferSize = "buf_size"
        case bufferCount = "buf_count"
        case mcumgrParameters = "mcumgr_params"
        case bootloaderInfo = "bootloader_info"
        case smpV2 = "smp_v2"
        case imageCheck = "image_check"
        case eraseProgressively = "erase_progressively"
        case indefiniteCBOR = "indefinite_cbor"
        case resetDelayMs = "reset_delay_ms"
    }

    public init(
        bufferSize: Int = 2475, bufferCount: Int = 4, reassembly: Bool = true, mcumgrParameters: Bool = true,
        bootloaderInfo: Bool = true, smpV2: Bool = true, imageCheck: Bool = true, eraseProgressively: Bool = false,
        indefiniteCBOR: Bool = true, resetDelayMs: Double = 250
    ) {
        self.bufferSize = bufferSize
        self.bufferCount = bufferCount
        self.reassembly = reassembly
        self.mcumgrParameters = mcumgrParameters
        self.bootloaderInfo = bootloaderInfo
        self.smpV2 = smpV2
        self.imageCheck = imageCheck
        self.eraseProgressively = eraseProgressively
        self.indefiniteCBOR = indefiniteCBOR
        self.resetDelayMs = resetDelayMs
    }
}

/// MCUboot's configuration and the flash it runs on (smp-mcuboot.md §6, §7).
public struct MCUbootOptions: Codable, Sendable, Hashable {
    /// Size of each slot (primary = secondary).
    public var slotSize: Int
    public var pageSize: Int
    public var pageEraseMicros: Double
    public var wordWriteMicros: Double
    /// `MCUBOOT_DOWNGRADE_PREVENTION`: a secondary image older than the primary is erased at boot.
    public var downgradePrevention: Bool
    /// `MCUBOOT_VERSION_CMP_USE_BUILD_NUMBER`.
    public var compareBuildNumber: Bool
    /// Keys the bootloader accepts (PEM). Empty: images are checked by hash only (`MCUBOOT_SIGNATURE_TYPE_NONE`).
    public var publicKeys: [String]
    /// Boot time without a swap, milliseconds.
    public var bootMs: Double
    /// The application confirms itself at start-up (`boot_write_img_confirmed()`), as many NCS apps do.
    public var selfConfirm: Bool
    /// What bootloader information answers for the query "mode" (Zephyr `bootutil` BOOT_MODE: 0 single application,
    /// 1 swap using scratch, 2 overwrite only, 3 swap without scratch, 4 DirectXIP, 5 DirectXIP with revert, 6 RAM
    /// load). The model swaps (3, the default: NCS's swap using move); the value is what the device reports.
    public var mode: Int

    enum CodingKeys: String, CodingKey {
        case slotSize = "slot_size"
        case pageSize = "page_size"
        case pageEraseMicros = "page_erase_us"
        case wordWriteMicros = "word_write_us"
        case downgradePrevention = "downgrade_prevention"
        case compareBuildNumber = "compare_build_number"
        case publicKeys = "public_keys"
        case bootMs = "boot_ms"
        case selfConfirm = "self_confirm"
        case mode = "bootloader_mode"
    }

    public init(
        slotSize: Int = 0x76000, pageSize: Int = 4096, pageEraseMicros: Double = 85_000, wordWriteMicros: Double = 41,
        downgradePrevention: Bool = false, compareBuildNumber: Bool = false, publicKeys: [String] = [],
        bootMs: Double = 300, selfConfirm: Bool = false, mode: Int = 3
    ) {
        self.slotSize = slotSize
        self.pageSize = pageSize
        self.pageEraseMicros = pageEraseMicros
        self.wordWriteMicros = wordWriteMicros
        self.downgradePrevention = downgradePrevention
        self.compareBuildNumber = compareBuildNumber
        self.publicKeys = publicKeys
        self.bootMs = bootMs
        self.selfConfirm = selfConfirm
        self.mode = mode
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        slotSize = try c.decode(Int.self, forKey: .slotSize)
        pageSize = try c.decode(Int.self, forKey: .pageSize)
        pageEraseMicros = try c.decode(Double.self, forKey: .pageEraseMicros)
        wordWriteMicros = try c.decode(Double.self, forKey: .wordWriteMicros)
        downgradePrevention = try c.decode(Bool.self, forKey: .downgradePrevention)
        compareBuildNumber = try c.decode(Bool.self, forKey: .compareBuildNumber)
        publicKeys = try c.decode([String].self, forKey: .publicKeys)
        bootMs = try c.decode(Double.self, forKey: .bootMs)
        selfConfirm = try c.decode(Bool.self, forKey: .selfConfirm)
        // Profiles written before the field: the model's swap without scratch.
        mode = try c.decodeIfPresent(Int.self, forKey: .mode) ?? 3
    }

    /// Time to erase `bytes` (whole pages), microseconds.
    func eraseMicros(bytes: Int) -> Double { Double((bytes + pageSize - 1) / pageSize) * pageEraseMicros }
    /// Time to write `bytes` (32-bit words), microseconds.
    func writeMicros(bytes: Int) -> Double { Double((bytes + 3) / 4) * wordWriteMicros }
    /// A swap (move or scratch) erases and writes every used page about three times.
    func swapMicros(bytes: Int) -> Double { 3 * (eraseMicros(bytes: bytes) + writeMicros(bytes: bytes)) }
}

/// The image a virtual SMP device ships with (per image number).
public struct SMPInstalledImage: Codable, Sendable, Hashable {
    /// "1.0.0" or "1.0.0+3".
    public var version: String
    /// Size of the synthetic firmware body.
    public var size: Int

    public init(version: String, size: Int) {
        self.version = version
        self.size = size
    }
}

/// A virtual Zephyr/NCS device updated by MCUmgr SMP into MCUboot (Firmware/smp-*.json, `"family": "smp"`).
public struct SMPDeviceProfile: Codable, Sendable, Hashable {
    /// Always "smp" (the family key the simulator host dispatches on).
    public var family: String
    public var name: String
    public var chip: String
    public var address: BluetoothAddress
    public var addressType: AddressType
    /// One entry per updatable image (`MCUMGR_GRP_IMG_UPDATABLE_IMAGE_NUMBER`): 0 the application, 1 the network
    /// core of an nRF5340.
    public var images: [SMPInstalledImage]
    public var smp: SMPServerOptions
    public var mcuboot: MCUbootOptions
    public var link: LinkParameters
    /// Divides every modelled duration. 1 = real time.
    public var speedup: Double

    enum CodingKeys: String, CodingKey {
        case family, name, chip, address, images, smp, mcuboot, link, speedup
        case addressType = "address_type"
    }

    public init(
        name: String, chip: String = "nRF52840", address: BluetoothAddress, addressType: AddressType = .random,
        images: [SMPInstalledImage] = [SMPInstalledImage(version: "1.0.0", size: 32 * 1024)],
        smp: SMPServerOptions = SMPServerOptions(), mcuboot: MCUbootOptions = MCUbootOptions(),
        link: LinkParameters = LinkParameters(
            phy: "2M", llDataLength: 251, maxMTU: 498, connectionIntervalMs: 7.5, packetsPerEvent: 6),
        speedup: Double = 1
    ) {
        self.family = "smp"
        self.name = name
        self.chip = chip
        self.address = address
        self.addressType = addressType
        self.images = images
        self.smp = smp
        self.mcuboot = mcuboot
        self.link = link
        self.speedup = speedup
    }

    /// A duration of `micros` microseconds, divided by `speedup`.
    func scaled(micros: Double) -> Duration {
        let factor = speedup > 0 ? speedup : 1
        return .nanoseconds(Int64((micros * 1000 / factor).rounded()))
    }
}
