import ATT
import BLECore

/// Access rules of a server attribute. The server enforces them against the link's security level
/// (`ATTBearer.securityLevel()`).
public struct GATTPermissions: OptionSet, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let read = GATTPermissions(rawValue: 0x01)
    public static let write = GATTPermissions(rawValue: 0x02)
    /// Writes need an encrypted link (LE Security Mode 1 level 2; the nRF5 SDK's `sm = 1, lv = 2`, `SEC_JUST_WORKS`);
    /// reads follow `.read`. A Write Request below that level gets Insufficient Authentication, as the SoftDevice
    /// answers on an unencrypted link; a Write Command is dropped.
    public static let encryptionRequired = GATTPermissions(rawValue: 0x04)
    /// On a characteristic definition: writes to its CCCD need an encrypted link too.
    public static let encryptedConfiguration = GATTPermissions(rawValue: 0x08)

    /// Read if the properties allow a read, write if they allow either kind of write.
    public init(properties: GATTProperties) {
        var permissions: GATTPermissions = []
        if properties.contains(.read) { permissions.insert(.read) }
        if !properties.isDisjoint(with: [.write, .writeWithoutResponse]) { permissions.insert(.write) }
        self = permissions
    }
}

/// A descriptor of a server characteristic (other than the CCCD, which is added automatically).
public struct GATTDescriptorDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var value: [UInt8]
    public var permissions: GATTPermissions
    public init(uuid: BluetoothUUID, value: [UInt8] = [], permissions: GATTPermissions = [.read]) {
        self.uuid = uuid
        self.value = value
        self.permissions = permissions
    }
}

/// A server characteristic. Its value is `value` until the application replaces it (`GATTServer.setValue`) or
/// answers reads itself (`GATTServerDelegate.read`). A CCCD follows the value when `properties` has notify or
/// indicate.
public struct GATTCharacteristicDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var properties: GATTProperties
    public var permissions: GATTPermissions
    public var value: [UInt8]
    public var descriptors: [GATTDescriptorDefinition]

    /// - Parameter permissions: defaults to what `properties` allow.
    public init(
        uuid: BluetoothUUID, properties: GATTProperties, permissions: GATTPermissions? = nil, value: [UInt8] = [],
        descriptors: [GATTDescriptorDefinition] = []
    ) {
        self.uuid = uuid
        self.properties = properties
        self.permissions = permissions ?? GATTPermissions(properties: properties)
        self.value = value
        self.descriptors = descriptors
    }
}

/// A server service.
public struct GATTServiceDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var isPrimary: Bool
    public var characteristics: [GATTCharacteristicDefinition]
    public init(uuid: BluetoothUUID, isPrimary: Bool = true, characteristics: [GATTCharacteristicDefinition]) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.characteristics = characteristics
    }
}

/// One attribute of the database (Core v5.4 Vol 3 Part F §3.2).
public struct GATTAttribute: Sendable, Hashable {
    public enum Role: Sendable, Hashable {
        /// A service declaration; the group ends at `endHandle`.
        case serviceDeclaration(endHandle: UInt16)
        case characteristicDeclaration
        /// A characteristic value with its declared properties.
        case characteristicValue(properties: GATTProperties)
        /// The CCCD of the characteristic whose value is at `valueHandle`.
        case clientConfiguration(valueHandle: UInt16)
        case descriptor
    }

    public var handle: UInt16
    public var type: BluetoothUUID
    public var value: [UInt8]
    public var permissions: GATTPermissions
    public var role: Role
    /// The service this attribute belongs to.
    public var serviceUUID: BluetoothUUID
    /// The characteristic this attribute belongs to (nil for service declarations).
    public var characteristicUUID: BluetoothUUID?
}

/// An attribute database declared in code. Handles are assigned in declaration order from 0x0001: for each
/// service its declaration, then per characteristic the declaration (0x2803), the value, the CCCD (0x2902) when the
/// characteristic can notify or indicate, then its other descriptors.
public struct GATTDatabase: Sendable {
    public let attributes: [GATTAttribute]

    public init(services: [GATTServiceDefinition]) {
        var attributes: [GATTAttribute] = []
        func nextHandle() -> UInt16 { UInt16(truncatingIfNeeded: attributes.count + 1) }
        for service in services {
            let serviceIndex = attributes.count
            attributes.append(
                GATTAttribute(
                    handle: nextHandle(),
                    type: service.isPrimary ? GATTAttributeType.primaryService : GATTAttributeType.secondaryService,
                    value: service.uuid.shortestLittleEndianBytes, permissions: [.read], role: .serviceDeclaration(endHandle: 0),
                    serviceUUID: service.uuid, characteristicUUID: nil))
            for characteristic in service.characteristics {
                let declarationHandle = nextHandle()
                let valueHandle = declarationHandle &+ 1
                // Core v5.4 Vol 3 Part G §3.3.1: Properties (1) | Value Handle (2) | UUID (2 or 16).
                let declaration =
                    [characteristic.properties.rawValue, UInt8(valueHandle & 0xFF), UInt8(valueHandle >> 8)]
                    + characteristic.uuid.shortestLittleEndianBytes
                attributes.append(
                    GATTAttribute(
                        handle: declarationHandle, type: GATTAttributeType.characteristic, value: declaration,
                        permissions: [.read], role: .characteristicDeclaration, serviceUUID: service.uuid,
                        characteristicUUID: characteristic.uuid))
                attributes.append(
                    GATTAttribute(
                        handle: valueHandle, type: characteristic.uuid, value: characteristic.value,
                        permissions: characteristic.permissions,
                        role: .characteristicValue(properties: characteristic.properties), serviceUUID: service.uuid,
                        characteristicUUID: characteristic.uuid))
                if !characteristic.properties.isDisjoint(with: [.notify, .indicate]) {
                    // Core v5.4 Vol 3 Part G §3.3.3.3: a characteristic that can notify or indicate has a CCCD,
                    // readable and writable, whose value is kept per client.
                    attributes.append(
                        GATTAttribute(
                            handle: nextHandle(), type: GATTAttributeType.clientCharacteristicConfiguration,
                            value: [0, 0],
                            permissions: characteristic.permissions.contains(.encryptedConfiguration)
                                ? [.read, .write, .encryptionRequired] : [.read, .write],
                            role: .clientConfiguration(valueHandle: valueHandle),
                            serviceUUID: service.uuid, characteristicUUID: characteristic.uuid))
                }
                for descriptor in characteristic.descriptors {
                    attributes.append(
                        GATTAttribute(
                            handle: nextHandle(), type: descriptor.uuid, value: descriptor.value,
                            permissions: descriptor.permissions, role: .descriptor, serviceUUID: service.uuid,
                            characteristicUUID: characteristic.uuid))
                }
            }
            attributes[serviceIndex].role = .serviceDeclaration(endHandle: UInt16(truncatingIfNeeded: attributes.count))
        }
        self.attributes = attributes
    }

    /// The attribute at `handle`, if there is one.
    public subscript(handle: UInt16) -> GATTAttribute? {
        guard handle >= 1, Int(handle) <= attributes.count else { return nil }
        return attributes[Int(handle) - 1]
    }

    /// The value handle of the first characteristic `characteristic` in the first service `service`.
    public func handle(of characteristic: BluetoothUUID, in service: BluetoothUUID) -> UInt16? {
        attributes.first {
            guard case .characteristicValue = $0.role else { return false }
            return $0.serviceUUID == service && $0.characteristicUUID == characteristic
        }?.handle
    }

    /// The CCCD handle of that characteristic, when it has one.
    public func cccdHandle(of characteristic: BluetoothUUID, in service: BluetoothUUID) -> UInt16? {
        guard let valueHandle = handle(of: characteristic, in: service) else { return nil }
        return attributes.first { $0.role == .clientConfiguration(valueHandle: valueHandle) }?.handle
    }

    /// The CCCD handle belonging to the characteristic value at `valueHandle`.
    public func cccdHandle(forValueHandle valueHandle: UInt16) -> UInt16? {
        attributes.first { $0.role == .clientConfiguration(valueHandle: valueHandle) }?.handle
    }

    /// The largest handle in use (0 for an empty database).
    public var lastHandle: UInt16 { UInt16(truncatingIfNeeded: attributes.count) }
}
