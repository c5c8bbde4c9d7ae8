import BLECore
import GATT
import LegacyDFU

/// Heart Rate service of `ble_app_hrs` (the SDK 11 application with the buttonless entry).
enum LegacyUUID {
    static let heartRate = BluetoothUUID(0x180D)
    static let heartRateMeasurement = BluetoothUUID(0x2A37)
}

enum LegacyDeviceDatabases {
    /// The DFU service: Packet, Control Point, DFU Version, in the order `ble_dfu_init` adds them. The Packet
    /// characteristic takes Write Commands only (Adafruit's also Write Requests, f5ab453); InfiniTime's likewise.
    static func dfuService(kind: LegacyFirmwareKind, version: UInt16?) -> GATTServiceDefinition {
        var packetProperties: GATTProperties = [.writeWithoutResponse]
        if kind == .adafruit { packetProperties.insert(.write) }
        var characteristics = [
            GATTCharacteristicDefinition(uuid: LegacyDFUUUID.packet, properties: packetProperties),
            GATTCharacteristicDefinition(uuid: LegacyDFUUUID.controlPoint, properties: [.write, .notify]),
        ]
        if let version {
            characteristics.append(
                GATTCharacteristicDefinition(
                    uuid: LegacyDFUUUID.version, properties: [.read], value: LegacyDFUVersion(rawValue: version).encoded))
        }
        return GATTServiceDefinition(uuid: LegacyDFUUUID.service, characteristics: characteristics)
    }

    static func deviceInformation(manufacturer: String, model: String, firmware: String) -> GATTServiceDefinition {
        GATTServiceDefinition(
            uuid: SimulatorUUID.deviceInformation,
            characteristics: [
                GATTCharacteristicDefinition(uuid: SimulatorUUID.manufacturerName, properties: [.read], value: Array(manufacturer.utf8)),
                GATTCharacteristicDefinition(uuid: SimulatorUUID.modelNumber, properties: [.read], value: Array(model.utf8)),
                GATTCharacteristicDefinition(uuid: SimulatorUUID.firmwareRevision, properties: [.read], value: Array(firmware.utf8)),
            ])
    }

    /// The bootloader: Generic Access (`DfuTarg`/`AdaDFU`), Generic Attribute, [Device Information on Adafruit's,
    /// `services_init`], the DFU service with the bootloader's DFU Version (none on SDK ≤ 6.1).
    static func bootloader(profile: LegacyDeviceProfile) -> GATTDatabase {
        var services = DeviceDatabases.common(name: profile.bootloaderName)
        if profile.kind == .adafruit {
            services.append(deviceInformation(manufacturer: "Adafruit Industries", model: profile.chip, firmware: profile.sdkVersion))
        }
        services.append(dfuService(kind: profile.kind, version: profile.dfuVersion))
        return GATTDatabase(services: services)
    }

    /// The application: Generic Access, Generic Attribute, Device Information, Heart Rate (`ble_app_hrs`), and the
    /// DFU service with version 0x0001 when it offers the buttonless entry. InfiniTime: its DFU service (0x0008).
    static func application(profile: LegacyDeviceProfile, firmwareRevision: String) -> GATTDatabase {
        var services = DeviceDatabases.common(name: profile.name)
        let manufacturer = profile.kind == .infinitime ? "PINE64" : profile.kind == .adafruit ? "Adafruit Industries" : "NordicSemiconductor"
        services.append(deviceInformation(manufacturer: manufacturer, model: profile.chip, firmware: firmwareRevision))
        if profile.kind == .infinitime {
            // NimbleController::Init registers, besides DFU: Current Time, Alert Notification, Immediate Alert,
            // Heart Rate, Battery (and services of its own); the DFU service comes among them.
            for uuid: UInt16 in [0x1805, 0x1811, 0x1802, 0x180D, 0x180F] {
                services.append(GATTServiceDefinition(uuid: BluetoothUUID(uuid), characteristics: []))
            }
            services.append(dfuService(kind: .infinitime, version: profile.dfuVersion ?? LegacyDFUVersion.sdk11.rawValue))
            return GATTDatabase(services: services)
        }
        services.append(
            GATTServiceDefinition(
                uuid: LegacyUUID.heartRate,
                characteristics: [GATTCharacteristicDefinition(uuid: LegacyUUID.heartRateMeasurement, properties: [.notify])]))
        if profile.applicationDFU {
            // SDK <= 6 applications have no DFU Version characteristic either.
            let version = profile.dfuVersion == nil ? nil : LegacyDFUVersion.application.rawValue
            services.append(dfuService(kind: profile.kind, version: version))
        }
        return GATTDatabase(services: services)
    }
}
