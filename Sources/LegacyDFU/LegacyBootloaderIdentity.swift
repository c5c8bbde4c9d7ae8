import BLECore
import GATT

/// Which Legacy DFU bootloader a device runs, as far as it tells it before anything is written (legacy-dfu.md §10):
/// the Adafruit nRF52 bootloader names itself `AdaDFU` (Generic Access device name) and publishes a Device
/// Information Service with "Adafruit Industries" as the manufacturer (its `services_init`; the SDK 11 bootloader has
/// no DIS). The Bluefruit application (`BLEDfu`/`BLEDis`) tells the same manufacturer.
///
/// Why it matters: Adafruit's `dfu_init.c` takes device type 0x0052 only, and checks it at Initialize DFU Parameters,
/// after Start DFU. Its default build is single bank, where Start erases bank 0: a package for another device type
/// would leave the board without its application (legacy-dfu.md §4, §5.4; Adafruit_nRF52_Bootloader #399). The
/// engine refuses such a package before Start (``LegacyDFUConfiguration/requiredDeviceType``).
public struct LegacyBootloaderIdentity: Hashable, Sendable, CustomStringConvertible {
    /// The Device Information Service's Manufacturer Name String (0x2A29), when there is one.
    public var manufacturer: String?
    /// The Generic Access Device Name (0x2A00), when readable.
    public var deviceName: String?

    public init(manufacturer: String? = nil, deviceName: String? = nil) {
        self.manufacturer = manufacturer
        self.deviceName = deviceName
    }

    /// The manufacturer Adafruit's bootloader and Bluefruit applications publish.
    public static let adafruitManufacturer = "Adafruit Industries"
    /// The name the Adafruit bootloader advertises and serves (`DEVICE_NAME`, commit 04d029a).
    public static let adafruitBootloaderName = "AdaDFU"
    /// The only device type the Adafruit bootloader takes (`ADAFRUIT_DEVICE_TYPE`, `src/dfu_init.c`).
    public static let adafruitDeviceType: UInt16 = 0x0052

    /// The device says it is an Adafruit board (its bootloader or a Bluefruit application).
    public var isAdafruit: Bool {
        manufacturer.map { $0.trimmingWhitespace == Self.adafruitManufacturer } == true
            || deviceName.map { $0.trimmingWhitespace == Self.adafruitBootloaderName } == true
    }

    /// The device type the init packet must carry for this device; nil when the host cannot tell (the SDK 11
    /// template compares it with UICR, which no characteristic shows).
    public var requiredDeviceType: UInt16? { isAdafruit ? Self.adafruitDeviceType : nil }

    public var description: String {
        isAdafruit ? "the Adafruit nRF52 bootloader" : "a Legacy DFU bootloader"
    }

    /// Reads the Device Name and the DIS manufacturer among `services`; a characteristic that is missing or cannot
    /// be read (not permitted, not UTF-8) is left nil, a lost link is thrown.
    public static func read(services: [GATTService], client: GATTClient) async throws(ATTClientError) -> LegacyBootloaderIdentity {
        var identity = LegacyBootloaderIdentity()
        identity.deviceName = try await readString(BluetoothUUID(0x2A00), in: BluetoothUUID(0x1800), services: services, client: client)
        identity.manufacturer = try await readString(BluetoothUUID(0x2A29), in: BluetoothUUID(0x180A), services: services, client: client)
        return identity
    }

    static func readString(
        _ uuid: BluetoothUUID, in serviceUUID: BluetoothUUID, services: [GATTService], client: GATTClient
    ) async throws(ATTClientError) -> String? {
        guard let service = services.first(where: { $0.uuid == serviceUUID }) else { return nil }
        let characteristics = try await client.discoverCharacteristics(of: service)
        guard let characteristic = characteristics.first(where: { $0.uuid == uuid }) else { return nil }
        do {
            let bytes = try await client.read(handle: characteristic.valueHandle)
            return String(validating: bytes, as: UTF8.self)
        } catch where error.code == .disconnected || error.code == .closed || error.code == .timeout {
            throw error
        } catch {
            return nil  // an ATT error (read not permitted, …): the device does not tell
        }
    }
}

extension String {
    fileprivate var trimmingWhitespace: Substring {
        let trimmed = drop { $0.isWhitespace || $0 == "\0" }
        var end = trimmed.endIndex
        while end > trimmed.startIndex, let last = trimmed[..<end].last, last.isWhitespace || last == "\0" {
            end = trimmed.index(before: end)
        }
        return trimmed[..<end]
    }
}
