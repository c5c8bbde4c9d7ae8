import BLECore

/// The reference Legacy profiles (also in Firmware/*.json, which a test keeps equal to these). Flash timings are
/// parameters (legacy-dfu.md §15: no Nordic source was read for them): nRF51 page erase 22 ms and 46 µs per word,
/// nRF52 85 ms and 41 µs (as the Secure DFU profiles), SPI NOR sector erase 43 ms (≈ 5 s for InfiniTime's 116
/// sectors, as the log in InfiniTime #1933 shows).
extension LegacyDeviceProfile {
    static let nrf51Flash = FlashParameters(pageSize: 0x400, pageEraseMicros: 22_000, wordWriteMicros: 46, queueDepth: 10, bankSize: 0)
    static let nrf52Flash = FlashParameters(pageSize: 0x1000, pageEraseMicros: 85_000, wordWriteMicros: 41, queueDepth: 10, bankSize: 0)
    /// `dfu_types.h` for the nRF51 without signing: bootloader at 0x3C000, settings page at 0x3FC00.
    static let nrf51Layout = LegacyFlashLayout(pageSize: 0x400, bootloaderStart: 0x3C000, bootloaderMaxSize: 0x3C00)
    /// `dfu_types.h` for the nRF52 (SDK 11): bootloader at 0x7A000, 0x5000 at most.
    static let nrf52Layout = LegacyFlashLayout(pageSize: 0x1000, bootloaderStart: 0x7A000, bootloaderMaxSize: 0x5000)

    /// An nRF51422 with the SDK 11 dual-bank BLE bootloader, S130 2.0.0 (FWID 0x80, application at 0x1B000) and
    /// `ble_app_hrs` with the buttonless entry: the device of IOS-DFU-Library's nRF51 SDK 11 test firmwares.
    public static func sdk11NRF51(address: BluetoothAddress) -> LegacyDeviceProfile {
        LegacyDeviceProfile(
            kind: .sdk11, name: "Nordic_HRM", chip: "nRF51422", sdkVersion: "11.0.0", address: address,
            softDeviceFWID: 0x80, applicationStart: 0x1B000, layout: nrf51Layout, flash: nrf51Flash,
            link: LinkParameters(phy: "1M", llDataLength: 27, maxMTU: 23, connectionIntervalMs: 30, packetsPerEvent: 6),
            installed: InstalledImages(
                application: InstalledImage(version: 1), bootloader: InstalledImage(version: 1),
                softdevice: InstalledImage(version: 0x80)))
    }

    /// An nRF52832 with the SDK 11 dual-bank BLE bootloader and S132 2.0.0 (FWID 0x81, application at 0x1C000).
    public static func sdk11NRF52(address: BluetoothAddress) -> LegacyDeviceProfile {
        LegacyDeviceProfile(
            kind: .sdk11, name: "Nordic_HRM", chip: "nRF52832", sdkVersion: "11.0.0", address: address,
            softDeviceFWID: 0x81, applicationStart: 0x1C000, layout: nrf52Layout, flash: nrf52Flash,
            link: LinkParameters(phy: "1M", llDataLength: 27, maxMTU: 23, connectionIntervalMs: 30, packetsPerEvent: 6),
            installed: InstalledImages(
                application: InstalledImage(version: 1), bootloader: InstalledImage(version: 1),
                softdevice: InstalledImage(version: 0x81)))
    }

    /// An Adafruit Feather nRF52832 with the Adafruit bootloader (single bank, S132 6.1.1: FWID 0xB7, application at
    /// 0x26000; bootloader at 0x74000, 7 reserved pages, `ADAFRUIT_DEV_REV` 0xADAF), RX pool 16 × 600, pstorage
    /// queue 18, 360 s timer, MTU up to 247: the bootloader as of commit 48a149f (2026-03-19), which has d28c2e0
    /// (2026-01-15); releases from 2023 (a980696) until that commit pin the MTU to 23 (legacy-dfu.md §10).
    public static func adafruitNRF52832(address: BluetoothAddress) -> LegacyDeviceProfile {
        LegacyDeviceProfile(
            kind: .adafruit, name: "Feather nRF52832", chip: "nRF52832", sdkVersion: "48a149f", address: address,
            bootloaderName: "AdaDFU", dualBank: false, deviceType: 0x0052, deviceRevision: 0xADAF, softDeviceFWID: 0xB7,
            applicationStart: 0x26000,
            layout: LegacyFlashLayout(pageSize: 0x1000, bootloaderStart: 0x74000, appDataReservedPages: 7, bootloaderMaxSize: 0xA000),
            receiveBuffers: 16, receiveBufferSize: 600,
            flash: FlashParameters(pageSize: 0x1000, pageEraseMicros: 85_000, wordWriteMicros: 41, queueDepth: 18, bankSize: 0),
            inactivityTimeoutSeconds: 360,
            link: LinkParameters(phy: "1M", llDataLength: 251, maxMTU: 247, connectionIntervalMs: 15, packetsPerEvent: 6),
            installed: InstalledImages(
                application: InstalledImage(version: 1), bootloader: InstalledImage(version: 1),
                softdevice: InstalledImage(version: 0xB7)))
    }

    /// An Adafruit Feather nRF52840 (bootloader at 0xF4000, 10 reserved pages, S140 6.1.1: FWID 0xB6,
    /// `ADAFRUIT_DEV_REV` 52840); otherwise as ``adafruitNRF52832(address:)``.
    public static func adafruitNRF52840(address: BluetoothAddress) -> LegacyDeviceProfile {
        var profile = adafruitNRF52832(address: address)
        profile.name = "Feather nRF52840"
        profile.chip = "nRF52840"
        profile.deviceRevision = 52840
        profile.softDeviceFWID = 0xB6
        profile.layout = LegacyFlashLayout(pageSize: 0x1000, bootloaderStart: 0xF4000, appDataReservedPages: 10, bootloaderMaxSize: 0xA000)
        profile.installed.softdevice = InstalledImage(version: 0xB6)
        return profile
    }

    /// A PineTime-class watch running InfiniTime: the DFU service (DFU Version 0.8) inside the application, the
    /// image to 475 136 bytes of SPI NOR.
    public static func pineTime(address: BluetoothAddress) -> LegacyDeviceProfile {
        LegacyDeviceProfile(
            kind: .infinitime, name: "InfiniTime", chip: "nRF52832", sdkVersion: "InfiniTime 1.14", address: address,
            softDeviceFWID: 0, applicationStart: 0x8000, layout: nrf52Layout, receiveBuffers: 1, receiveBufferSize: 20,
            flash: FlashParameters(pageSize: 0x1000, pageEraseMicros: 43_000, wordWriteMicros: 12, queueDepth: 1, bankSize: 0),
            inactivityTimeoutSeconds: 10_000.0 / 1024,
            link: LinkParameters(phy: "1M", llDataLength: 251, maxMTU: 247, connectionIntervalMs: 30, packetsPerEvent: 6),
            installed: InstalledImages(application: InstalledImage(version: 1), bootloader: InstalledImage(version: 1), softdevice: nil))
    }

    /// An nRF51 with an SDK 6.1 bootloader: no DFU Version characteristic, typed Start, a bare `02` and a 2-byte
    /// CRC (S110 7.0, application at 0x16000).
    public static func sdk6NRF51(address: BluetoothAddress) -> LegacyDeviceProfile {
        var profile = sdk11NRF51(address: address)
        profile.kind = .sdk6
        profile.sdkVersion = "6.1.0"
        profile.dfuVersion = nil
        profile.peerDataHandover = false
        profile.softDeviceFWID = 0x4F
        profile.applicationStart = 0x16000
        profile.installed.softdevice = InstalledImage(version: 0x4F)
        return profile
    }
}
