import BLECore
import DFUPackage
import LegacyDFU

extension LegacyBootloader {
    /// Where the device boots after a reset (`main.c`): the application when bank 0 holds a valid one, else the
    /// bootloader again (at address + 1: the peer data are gone).
    public var bootTarget: LegacyBootTarget { applicationValid ? .application : .bootloader }

    // MARK: Validate, activate, reset

    /// dfu_image_validate: all data received, then the post-validation (CRC-16 of the flash contents); on a failure
    /// the state stays VALIDATE, so a second Validate gets "invalid state".
    mutating func validate(now: Duration) -> LegacyStatus {
        guard state == .receivingData else { return .invalidState }
        guard dataReceived == imageSize else { return .invalidState }
        state = .validating
        restartTimer(now)
        flash.retire(now: now)
        guard postvalidate(flash.contents(count: Int(imageSize))) else { return .crcError }
        state = .waitingForActivate
        return .success
    }

    /// `05`: the transport closes the link, then dfu_image_activate; in any other state than WAIT_4_ACTIVATE the
    /// bootloader resets instead (dfu_reset). Activation per update (legacy-dfu.md §7.2): an application becomes
    /// bank 0 (copied from bank 1 on dual bank); a bootloader is copied by the MBR after the reset; a SoftDevice
    /// (with its bootloader) is copied by the MBR and leaves bank 0 invalid, so the device stays in the bootloader
    /// for the application that follows in a second session.
    ///
    /// `power-loss-at=after-activate` on a dual-bank application update: the power goes while bank 1 is copied into
    /// bank 0 (`dfu_activate_app` queues the erase, the copy, then the settings): the settings still say VALID_APP
    /// with CRC 0 (SDK 11 never stores a CRC), so the partly copied application passes `bootloader_app_is_valid` and
    /// boots (legacy-dfu.md §7.5, inferred from the code). Modelled: half the image's pages copied, the rest erased.
    mutating func activate(now: Duration) -> [LegacyBootloaderAction] {
        guard state == .waitingForActivate else { return reset() }
        timerDeadline = nil
        flash.drain()
        let image = flash.contents(count: Int(imageSize))
        let mode = LegacyImageType(rawValue: updateMode)
        let version = applicationVersion
        if mode.contains(.softdevice) {
            let sdSize = Int(startSizes.softdevice)
            let softdevice = Array(image.prefix(sdSize))
            installed.softdevice = InstalledImage(
                version: version, size: UInt32(softdevice.count), sha256: ImageDigest.sha256Hex(softdevice))
            if startSizes.bootloader > 0 {
                let bootloader = Array(image.dropFirst(sdSize))
                installed.bootloader = InstalledImage(
                    version: version, size: UInt32(bootloader.count), sha256: ImageDigest.sha256Hex(bootloader))
            }
            if let info = SoftDeviceInfo(image: softdevice) {
                softDeviceFWID = info.fwid
                applicationStart = Int(info.end)
            }
            bank0 = .invalid  // bootloader_dfu_update_process(DFU_UPDATE_SD_SWAPPED)
            installed.application = nil
        } else if mode.contains(.bootloader) {
            installed.bootloader = InstalledImage(version: version, size: UInt32(image.count), sha256: ImageDigest.sha256Hex(image))
        } else if profile.dualBank, let trigger = faults.atStep(["activate"], after: true), trigger.action == .powerLoss {
            let page = max(profile.layout.pageSize, 1)
            let copied = min(image.count, (image.count / 2 + page - 1) / page * page)
            let partial = Array(image.prefix(copied)) + [UInt8](repeating: 0xFF, count: image.count - copied)
            installed.application = InstalledImage(version: version, size: UInt32(partial.count), sha256: ImageDigest.sha256Hex(partial))
            bank0 = .validApp
            return fire(trigger, now: now)
        } else {
            installed.application = InstalledImage(version: version, size: UInt32(image.count), sha256: ImageDigest.sha256Hex(image))
            bank0 = .validApp
        }
        counters.updatesCompleted += 1
        return [.reboot(into: bootTarget)]
    }

    /// `06` (and a failed activation): dfu_reset. Adafruit restarts into itself when a transfer was cut short
    /// (`restart_into_bootloader`, 3249f41); otherwise the application starts when bank 0 is valid.
    mutating func reset() -> [LegacyBootloaderAction] {
        counters.resets += 1
        timerDeadline = nil
        let cutShort = state == .receivingData && dataReceived != imageSize
        if profile.kind == .adafruit, cutShort { return [.reboot(into: .bootloader)] }
        return [.reboot(into: bootTarget)]
    }

    /// The init packet's application version (0 when absent).
    var applicationVersion: UInt32 {
        guard initPacket.count >= 8 else { return 0 }
        var r = ByteReader(Array(initPacket[4..<8]))
        return (try? r.readUInt32("application version")) ?? 0
    }

    // MARK: Init packet checks

    /// dfu_init_prevalidate: SDK 11 `dfu_init_template.c` or Adafruit `src/dfu_init.c` (legacy-dfu.md §5.4).
    func prevalidate() -> LegacyStatus {
        if profile.initSigningKey != nil, profile.kind == .sdk11 { return signedPrevalidate() }
        // Length: at least dfu_init_packet_t (12 bytes) and 2 bytes of extension → NRF_ERROR_INVALID_LENGTH.
        guard initPacket.count >= 12 else { return .operationFailed }
        let count = Int(word16(8))
        let extensionStart = 10 + 2 * count
        guard extensionStart + 2 <= initPacket.count else { return .operationFailed }
        let deviceType = word16(0)
        let deviceRevision = word16(2)
        switch profile.kind {
        case .adafruit:
            // ADAFRUIT_DEVICE_TYPE 0x0052, else NRF_ERROR_FORBIDDEN; the board's ADAFRUIT_DEV_REV unlocks SD/BL.
            guard deviceType == 0x0052 else { return .operationFailed }
            let mode = LegacyImageType(rawValue: updateMode)
            if mode.contains(.softdevice) || mode.contains(.bootloader), deviceRevision != profile.deviceRevision {
                return .operationFailed
            }
        default:
            // Checked only when UICR holds a value (DFU_DEVICE_TYPE_EMPTY / DFU_DEVICE_REVISION_EMPTY = 0xFFFF).
            if profile.deviceType != 0xFFFF, deviceType != profile.deviceType { return .operationFailed }
            if profile.deviceRevision != 0xFFFF, deviceRevision != profile.deviceRevision { return .operationFailed }
        }
        // The installed SoftDevice or DFU_SOFTDEVICE_ANY (0xFFFE) must be listed.
        let listed = (0..<count).map { word16(10 + 2 * $0) }
        guard listed.contains(where: { $0 == 0xFFFE || $0 == softDeviceFWID }) else { return .operationFailed }
        return .success
    }

    /// dfu_init_postvalidate: CRC-16 of the image against the first two bytes of the extension (SDK ≤ 6.1: the
    /// 2-byte init packet; none received: not checked). A 0.6/0.7 init packet has its extension id there: it fails.
    func postvalidate(_ image: [UInt8]) -> Bool {
        if profile.initSigningKey != nil, profile.kind == .sdk11 { return signedPostvalidate(image) }
        let offset: Int
        if profile.kind == .sdk6 {
            guard initPacket.count >= 2 else { return true }
            offset = 0
        } else {
            offset = 10 + 2 * Int(word16(8))
            guard offset + 2 <= initPacket.count else { return false }
        }
        return CRC16.ccittFalse(image) == word16(offset)
    }

    func word16(_ offset: Int) -> UInt16 {
        guard offset + 2 <= initPacket.count else { return 0 }
        return UInt16(initPacket[offset]) | UInt16(initPacket[offset + 1]) << 8
    }
}

/// The SoftDevice information structure at offset 0x2000 of a SoftDevice image (the image starts at 0x1000, after
/// the MBR; `nrf_sdm.h` SOFTDEVICE_INFO_STRUCT_OFFSET, magic 0x51B1E5DB, `SD_SIZE_GET` at +8, `SD_FWID_GET` at +12).
/// Every SoftDevice in the package corpus carries it (S110 8.0: FWID 0x64, end 0x18000; S130 2.0: 0x80, 0x1B000).
struct SoftDeviceInfo: Hashable, Sendable {
    var end: UInt32
    var fwid: UInt16

    init?(image: [UInt8]) {
        let base = 0x2000
        guard image.count >= base + 14 else { return nil }
        var r = ByteReader(Array(image[base + 4..<base + 14]))
        guard let magic = try? r.readUInt32("magic"), magic == 0x51B1_E5DB, let end = try? r.readUInt32("size"),
            let fwid = try? r.readUInt16("fwid")
        else { return nil }
        self.end = end
        self.fwid = fwid
    }
}
