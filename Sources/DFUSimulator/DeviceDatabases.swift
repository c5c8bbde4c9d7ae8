import BLECore
import DFUProtocol
import GATT

/// UUIDs of the services the virtual devices publish.
public enum SimulatorUUID {
    public static let genericAccess = BluetoothUUID(0x1800)
    public static let deviceName = BluetoothUUID(0x2A00)
    public static let genericAttribute = BluetoothUUID(0x1801)
    public static let serviceChanged = BluetoothUUID(0x2A05)
    public static let deviceInformation = BluetoothUUID(0x180A)
    public static let modelNumber = BluetoothUUID(0x2A24)
    public static let firmwareRevision = BluetoothUUID(0x2A26)
    public static let hardwareRevision = BluetoothUUID(0x2A27)
    public static let manufacturerName = BluetoothUUID(0x2A29)
    /// The demo service of application mode: `B1ED0001-5EC0-4D46-9E11-0000B1EDF00D`.
    public static let demoService = demo(0x01)
    /// Its counter (read, notify): a u32 little-endian that counts reads.
    public static let demoCounter = demo(0x02)

    static func demo(_ short: UInt8) -> BluetoothUUID {
        BluetoothUUID(bigEndianBytes: [
            0xB1, 0xED, 0x00, short, 0x5E, 0xC0, 0x4D, 0x46, 0x9E, 0x11, 0x00, 0x00, 0xB1, 0xED, 0xF0, 0x0D,
        ]) ?? BluetoothUUID(0xFFFF)
    }
}

/// The default advertising name of the bootloader (`NRF_DFU_BLE_ADV_NAME`).
public let bootloaderDefaultName = "DfuTarg"

enum DeviceDatabases {
    /// Generic Access with the device name, Generic Attribute with Service Changed (indicate).
    static func common(name: String) -> [GATTServiceDefinition] {
        [
            GATTServiceDefinition(
                uuid: SimulatorUUID.genericAccess,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: SimulatorUUID.deviceName, properties: [.read], value: Array(name.utf8))
                ]),
            GATTServiceDefinition(
                uuid: SimulatorUUID.genericAttribute,
                characteristics: [
                    // Affected range 0x0001-0xFFFF.
                    GATTCharacteristicDefinition(
                        uuid: SimulatorUUID.serviceChanged, properties: [.indicate], permissions: [],
                        value: [0x01, 0x00, 0xFF, 0xFF])
                ]),
        ]
    }

    /// Application mode: common services, Device Information, the demo service, FE59 with the buttonless
    /// characteristic of the profile (write + indicate).
    static func application(profile: DeviceProfile, name: String, firmwareRevision: String) -> GATTDatabase {
        var services = common(name: name)
        var information = [
            GATTCharacteristicDefinition(
                uuid: SimulatorUUID.manufacturerName, properties: [.read], value: Array("bledfu virtual device".utf8)),
            GATTCharacteristicDefinition(
                uuid: SimulatorUUID.modelNumber, properties: [.read], value: Array(profile.chip.utf8)),
        ]
        // By default the bootloader's NRF_DFU_HW_VERSION as a decimal string: what `bledfu` compares with an init
        // packet's hw_version before the jump.
        let hardware = profile.hardwareRevision ?? String(profile.hwVersion)
        if !hardware.isEmpty {
            information.append(
                GATTCharacteristicDefinition(
                    uuid: SimulatorUUID.hardwareRevision, properties: [.read], value: Array(hardware.utf8)))
        }
        information.append(
            GATTCharacteristicDefinition(
                uuid: SimulatorUUID.firmwareRevision, properties: [.read], value: Array(firmwareRevision.utf8)))
        services.append(GATTServiceDefinition(uuid: SimulatorUUID.deviceInformation, characteristics: information))
        services.append(
            GATTServiceDefinition(
                uuid: SimulatorUUID.demoService,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: SimulatorUUID.demoCounter, properties: [.read, .notify], value: [0, 0, 0, 0])
                ]))
        if let buttonless = buttonlessUUID(profile.buttonless, uuids: profile.dfuUUIDs) {
            // ble_dfu_bonded.c ble_dfu_buttonless_char_add: value and CCCD writes need SEC_JUST_WORKS (encrypted).
            let permissions: GATTPermissions =
                profile.requiresBonds ? [.write, .encryptionRequired, .encryptedConfiguration] : [.write]
            services.append(
                GATTServiceDefinition(
                    uuid: profile.dfuUUIDs.service,
                    characteristics: [
                        GATTCharacteristicDefinition(
                            uuid: buttonless, properties: [.write, .indicate], permissions: permissions)
                    ]))
        }
        return GATTDatabase(services: services)
    }

    static func buttonlessUUID(_ kind: ButtonlessKind, uuids: SecureDFUUUIDs) -> BluetoothUUID? {
        switch kind {
        case .none: nil
        case .unbonded: uuids.buttonlessWithoutBonds
        case .bonded: uuids.buttonlessWithBonds
        }
    }

    /// Bootloader mode: common services and FE59 with Control Point (write, notify) and Packet (write without
    /// response only, as `dfu_pkt_char_add` declares it). With `NRF_DFU_BLE_REQUIRES_BONDS` both values need an
    /// encrypted link (`write_perm` `sm = 1, lv = 2`); the Control Point's CCCD stays open (no `p_cccd_md`).
    static func bootloader(name: String, requiresBonds: Bool = false, uuids: SecureDFUUUIDs = .standard) -> GATTDatabase {
        var services = common(name: name)
        let secured: GATTPermissions = requiresBonds ? [.encryptionRequired] : []
        services.append(
            GATTServiceDefinition(
                uuid: uuids.service,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: uuids.controlPoint, properties: [.write, .notify],
                        permissions: secured.union(.write)),
                    GATTCharacteristicDefinition(
                        uuid: uuids.packet, properties: [.writeWithoutResponse],
                        permissions: secured.union(.write)),
                ]))
        return GATTDatabase(services: services)
    }
}

/// The buttonless characteristic's behaviour (`ble_dfu.c`, `ble_dfu_unbonded.c`), pure.
struct ButtonlessLogic: Sendable {
    let kind: ButtonlessKind
    /// The name set with opcode 0x02 (unbonded only).
    var advertisingName: String?

    enum Outcome: Equatable, Sendable {
        /// Refuse the write with this ATT error.
        case attError(UInt8)
        /// Indicate these bytes; `jump` when the bootloader starts once the indication is confirmed.
        case indicate([UInt8], jump: Bool)
    }

    mutating func write(_ value: [UInt8], indicationsEnabled: Bool) -> Outcome {
        // on_ctrlpt_write: indications must be on, else CCCD improperly configured.
        guard indicationsEnabled else { return .attError(0xFD) }
        let request: ButtonlessRequest
        do {
            request = try ButtonlessRequest(decoding: value)
        } catch {
            if value.first == 0x02 {
                return .indicate(
                    ButtonlessResponse(requestOpcode: 0x02, status: .invalidAdvertisementName).encoded, jump: false)
            }
            return .indicate(
                ButtonlessResponse(requestOpcode: value.first ?? 0, status: .opCodeNotSupported).encoded, jump: false)
        }
        switch request {
        case .enterBootloader:
            return .indicate(ButtonlessResponse(requestOpcode: 0x01, status: .success).encoded, jump: true)
        case .setAdvertisementName(let name):
            guard kind == .unbonded else {
                return .indicate(
                    ButtonlessResponse(requestOpcode: 0x02, status: .opCodeNotSupported).encoded, jump: false)
            }
            let length = name.utf8.count
            guard (1...ButtonlessRequest.maximumNameLength).contains(length) else {
                return .indicate(
                    ButtonlessResponse(requestOpcode: 0x02, status: .invalidAdvertisementName).encoded, jump: false)
            }
            advertisingName = name
            return .indicate(ButtonlessResponse(requestOpcode: 0x02, status: .success).encoded, jump: false)
        case .unknown(let opcode, _):
            return .indicate(
                ButtonlessResponse(requestOpcode: opcode, status: .opCodeNotSupported).encoded, jump: false)
        }
    }
}
