import BLECore
import GATT

/// How a device with the Legacy DFU service is to be updated, decided from its services and its DFU Version, never
/// from a user flag (issue point 1; the iOS and Android libraries' rules, legacy-dfu.md §8.4).
public enum LegacyDeviceMode: Hashable, Sendable, CustomStringConvertible {
    /// A bootloader (SDK ≤ 11, Adafruit): ready to take an image. `version` nil: SDK ≤ 6.1 (no DFU Version).
    case bootloader(version: LegacyDFUVersion?)
    /// The DFU service inside the running application (InfiniTime): ready to take an application image, without
    /// Reset or Report Received Image Size.
    case applicationService(version: LegacyDFUVersion)
    /// An application with the legacy buttonless entry (DFU Version 0.1, or an older one without the version):
    /// Start DFU makes it jump to its bootloader.
    case application(version: LegacyDFUVersion?)

    public var description: String {
        switch self {
        case .bootloader(let version): "Legacy DFU bootloader (DFU Version \(version?.description ?? "absent: SDK ≤ 6.1"))"
        case .applicationService(let version): "Legacy DFU service in the application (DFU Version \(version))"
        case .application(let version): "application with the legacy buttonless entry (DFU Version \(version?.description ?? "absent"))"
        }
    }

    /// Whether the device takes an image on this link (no jump first).
    public var isReady: Bool { if case .application = self { false } else { true } }
}

public enum LegacyDetection {
    /// Services a bootloader publishes besides the DFU service: Generic Access, Generic Attribute, Device Information
    /// (Adafruit's `services_init`).
    static let bootloaderServices: Set<BluetoothUUID> = [
        BluetoothUUID(0x1800), BluetoothUUID(0x1801), BluetoothUUID(0x180A), LegacyDFUUUID.service,
    ]

    /// The mode of a device with these primary services and this DFU Version value; nil without the DFU service.
    ///
    /// - DFU Version 0.1 → an application with the buttonless entry (`ble_app_hrs`, Bluefruit `BLEDfu`).
    /// - Another version with nothing but the bootloader's services → a bootloader; with other services as well →
    ///   the DFU service inside an application (InfiniTime reports 0.8 next to its own services).
    /// - No version: a bootloader of SDK ≤ 6.1 when the DFU service comes with the bootloader's services only (and
    ///   a Packet characteristic), else an application (iOS `isInApplicationMode`; Android: more than 3 services).
    public static func mode(services: [BluetoothUUID], version: LegacyDFUVersion?, hasPacket: Bool = true) -> LegacyDeviceMode? {
        guard services.contains(LegacyDFUUUID.service) else { return nil }
        let onlyBootloaderServices = services.allSatisfy { bootloaderServices.contains($0) }
        guard let version else {
            return onlyBootloaderServices && hasPacket ? .bootloader(version: nil) : .application(version: nil)
        }
        if version.isApplication { return .application(version: version) }
        return onlyBootloaderServices ? .bootloader(version: version) : .applicationService(version: version)
    }

    /// The engine's settings for a device in `mode` (the DFU Version decides the init procedure; the service inside
    /// InfiniTime answers neither Reset nor Report Received Image Size).
    public static func configure(_ configuration: inout LegacyDFUConfiguration, for mode: LegacyDeviceMode) {
        switch mode {
        case .bootloader(let version):
            configuration.deviceVersion = version
        case .applicationService(let version):
            configuration.deviceVersion = version
            configuration.checkReceivedSize = false
            // InfiniTime answers Start after erasing its SPI NOR area (≈ 5 s, InfiniTime #1933); a Start it ignores
            // because a lost link left its service busy is waited out, and 15 s outlasts the watch's ≈ 9.8 s
            // inactivity timer that frees the service (30 s before: two lost links cost a minute).
            configuration.eraseTimeout = min(configuration.eraseTimeout, .seconds(15))
        case .application(let version):
            configuration.deviceVersion = version
        }
    }
}

/// Where the bootloader is to be found after the legacy buttonless jump (legacy-dfu.md §8.3): the candidates in the
/// order to try them.
public struct LegacyBootloaderLocation: Hashable, Sendable, CustomStringConvertible {
    /// Addresses to look for, best first.
    public var addresses: [BluetoothAddress]
    /// Names the bootloaders advertise (`DfuTarg`, Adafruit `AdaDFU`).
    public var names: [String]

    public init(addresses: [BluetoothAddress], names: [String] = ["DfuTarg", "AdaDFU"]) {
        self.addresses = addresses
        self.names = names
    }

    /// After a jump from an application at `address`. With the peer data handed over (SDK 11 `dfu_app_handler`,
    /// Bluefruit `BLEDfu`) the bootloader keeps the address (SDK 11 advertises directed to the central that jumped,
    /// with no AD data; Adafruit undirected); without them (older applications, a reset since) it advertises at
    /// address + 1 (low byte incremented, no carry) with its name. Both are candidates; the same address first unless
    /// the application had no DFU Version (SDK ≤ 6: iOS expects a new address).
    public static func afterJump(from address: BluetoothAddress, version: LegacyDFUVersion?) -> LegacyBootloaderLocation {
        let plusOne = address.nordicBootloaderAddress
        return LegacyBootloaderLocation(addresses: version == nil ? [plusOne, address] : [address, plusOne])
    }

    /// After a reset (`06`), a timeout or an activation: no peer data survive, so a bootloader comes up at address + 1;
    /// a dual-bank device with its old application comes up as that application, at `address`.
    public static func afterReset(of applicationAddress: BluetoothAddress) -> LegacyBootloaderLocation {
        LegacyBootloaderLocation(addresses: [applicationAddress.nordicBootloaderAddress, applicationAddress])
    }

    public var description: String {
        "addresses " + addresses.map(\.description).joined(separator: " or ") + ", names " + names.joined(separator: "/")
    }
}

/// What an advertisement tells of Legacy DFU, for a scanner (`bledfu scan`), without connecting.
///
/// - The DFU service UUID `00001530-…` in the service lists: a bootloader (`advertising_init` lists it, SDK 11 and
///   Adafruit) or InfiniTime (its application advertises it).
/// - The bootloaders' names, `DfuTarg` (SDK 11) and `AdaDFU` (Adafruit), with or without the UUID.
///
/// An application with the legacy buttonless entry (SDK 11 `ble_app_hrs`, a Bluefruit sketch) advertises its own
/// services and name only; its DFU Version 0.1 is read after connecting (``LegacyDetection/mode(services:version:hasPacket:)``),
/// which `bledfu flash` does. SDK 11's directed advertising after the jump carries no AD data at all.
public enum LegacyAdvertisement {
    /// The names the Legacy bootloaders advertise.
    public static let bootloaderNames: Set<String> = ["DfuTarg", LegacyBootloaderIdentity.adafruitBootloaderName]

    /// Whether an advertisement with these service UUIDs and this name is a Legacy DFU device.
    public static func isLegacy(services: [BluetoothUUID], name: String?) -> Bool {
        services.contains(LegacyDFUUUID.service) || name.map { bootloaderNames.contains($0) } == true
    }
}
