import BLECore

/// What a virtual device keeps across a power cycle, as a real nRF5 keeps it in flash (JSON via Codable).
///
/// Persisted: the installed images per part, the bootloader settings page as last written to flash (stored init
/// command; the data progress only when the profile's `save_progress` is on, since only then does the bootloader
/// write it), the bytes of the update bank up to the last executed object (`offset_last`), the mode the device runs
/// and the name the bootloader advertises after a buttonless name change. Not persisted (RAM on the device): the
/// current object, the PRN target and countdown, unexecuted data, queued flash operations, counters and faults.
///
/// JSON keys:
///
///     format            1
///     mode              "app" | "bootloader"
///     installed         InstalledImages (version, size, sha256 per part)
///     settings          BootloaderSettings as in flash (init_command as a byte array)
///     bank              lowercase hex of the update bank, offset 0 ..< settings.offset_last
///     advertising_name  the bootloader name set through buttonless (absent when none)
public struct DevicePersistentState: Codable, Sendable, Hashable {
    /// The layout version of this snapshot (1).
    public var format: Int
    public var mode: DeviceMode
    public var installed: InstalledImages
    /// The settings page as last written to flash.
    public var settings: BootloaderSettings
    /// The update bank up to `settings.offsetLast` (what executed objects put there).
    public var bank: [UInt8]
    /// The bootloader's advertising name set through the buttonless characteristic, if any.
    public var advertisingName: String?

    public init(
        mode: DeviceMode, installed: InstalledImages, settings: BootloaderSettings, bank: [UInt8],
        advertisingName: String? = nil
    ) {
        self.format = 1
        self.mode = mode
        self.installed = installed
        self.settings = settings
        self.bank = bank
        self.advertisingName = advertisingName
    }

    enum CodingKeys: String, CodingKey {
        case format, mode, installed, settings, bank
        case advertisingName = "advertising_name"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        format = try container.decodeIfPresent(Int.self, forKey: .format) ?? 1
        mode = try container.decode(DeviceMode.self, forKey: .mode)
        installed = try container.decode(InstalledImages.self, forKey: .installed)
        settings = try container.decode(BootloaderSettings.self, forKey: .settings)
        let hex = try container.decodeIfPresent(String.self, forKey: .bank) ?? ""
        guard let bytes = Self.bytes(hex: hex) else {
            throw DecodingError.dataCorruptedError(forKey: .bank, in: container, debugDescription: "bank is not hex")
        }
        bank = bytes
        advertisingName = try container.decodeIfPresent(String.self, forKey: .advertisingName)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(format, forKey: .format)
        try container.encode(mode, forKey: .mode)
        try container.encode(installed, forKey: .installed)
        try container.encode(settings, forKey: .settings)
        try container.encode(Self.hex(bank), forKey: .bank)
        try container.encodeIfPresent(advertisingName, forKey: .advertisingName)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func bytes(hex: String) -> [UInt8]? {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}

extension BootloaderStateMachine {
    /// The flash part of a persistent snapshot: installed images, the settings page, the bank up to `offset_last`.
    public var persistentSnapshot: (installed: InstalledImages, settings: BootloaderSettings, bank: [UInt8]) {
        // Queued writes of executed objects complete before the settings page write that follows them.
        var drained = flash
        drained.drain()
        return (installed, persisted, drained.contents(count: Int(persisted.offsetLast)))
    }

    /// Loads what a power cycle keeps: RAM state starts afresh from the settings page.
    public mutating func restore(installed: InstalledImages, settings: BootloaderSettings, bank: [UInt8]) {
        self.installed = installed
        persisted = settings
        flash.restore(bank: bank)
        currentType = nil
        prnTarget = 0
        prnCountdown = 0
        stalled = false
        reloadSettings()
    }
}
