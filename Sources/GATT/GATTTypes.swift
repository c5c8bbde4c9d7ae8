import ATT
import BLECore

/// Attribute types GATT itself defines (Core v5.4 Vol 3 Part G §3, Assigned Numbers §3.6/§3.7).
public enum GATTAttributeType {
    /// Primary Service declaration (0x2800).
    public static let primaryService = BluetoothUUID(0x2800)
    /// Secondary Service declaration (0x2801).
    public static let secondaryService = BluetoothUUID(0x2801)
    /// Include declaration (0x2802).
    public static let include = BluetoothUUID(0x2802)
    /// Characteristic declaration (0x2803).
    public static let characteristic = BluetoothUUID(0x2803)
    /// Characteristic Extended Properties descriptor (0x2900).
    public static let extendedProperties = BluetoothUUID(0x2900)
    /// Client Characteristic Configuration descriptor (0x2902).
    public static let clientCharacteristicConfiguration = BluetoothUUID(0x2902)
}

/// Characteristic Properties, the first octet of a characteristic declaration (Core v5.4 Vol 3 Part G §3.3.1.1).
public struct GATTProperties: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let broadcast = GATTProperties(rawValue: 0x01)
    public static let read = GATTProperties(rawValue: 0x02)
    public static let writeWithoutResponse = GATTProperties(rawValue: 0x04)
    public static let write = GATTProperties(rawValue: 0x08)
    public static let notify = GATTProperties(rawValue: 0x10)
    public static let indicate = GATTProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = GATTProperties(rawValue: 0x40)
    public static let extendedProperties = GATTProperties(rawValue: 0x80)

    private static let known: [(GATTProperties, name: String, words: String)] = [
        (.broadcast, "broadcast", "broadcast"), (.read, "read", "read"),
        (.writeWithoutResponse, "writeWithoutResponse", "write without response"), (.write, "write", "write"),
        (.notify, "notify", "notify"), (.indicate, "indicate", "indicate"),
        (.authenticatedSignedWrites, "authenticatedSignedWrites", "signed write"),
        (.extendedProperties, "extendedProperties", "extended properties"),
    ]

    /// The properties set, as stable tokens in bit order (`["read", "writeWithoutResponse"]`): `gatt --json`.
    public var names: [String] { Self.known.filter { contains($0.0) }.map(\.name) }

    /// The properties set, in words for people ("read, write without response"; "none").
    public var words: String {
        let words = Self.known.filter { contains($0.0) }.map(\.words)
        return words.isEmpty ? "none" : words.joined(separator: ", ")
    }

    public var description: String { "[" + names.joined(separator: ", ") + "]" }
}

/// Client Characteristic Configuration bits (Core v5.4 Vol 3 Part G §3.3.3.3).
public struct GATTClientConfiguration: OptionSet, Hashable, Sendable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public static let notification = GATTClientConfiguration(rawValue: 0x0001)
    public static let indication = GATTClientConfiguration(rawValue: 0x0002)

    /// The two little-endian octets written to a CCCD.
    public var encoded: [UInt8] { [UInt8(rawValue & 0xFF), UInt8(rawValue >> 8)] }
}

/// A descriptor found by discovery.
public struct GATTDescriptor: Hashable, Sendable, CustomStringConvertible {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    public init(handle: UInt16, uuid: BluetoothUUID) {
        self.handle = handle
        self.uuid = uuid
    }
    public var description: String { "descriptor \(uuid) @0x\(String(handle, radix: 16))" }
}

/// A characteristic found by discovery (Core v5.4 Vol 3 Part G §4.6).
public struct GATTCharacteristic: Hashable, Sendable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    /// Handle of the characteristic declaration (0x2803).
    public var declarationHandle: UInt16
    public var valueHandle: UInt16
    public var properties: GATTProperties
    /// The last handle of this characteristic's definition (value and descriptors).
    public var endHandle: UInt16
    public var descriptors: [GATTDescriptor]

    public init(
        uuid: BluetoothUUID, declarationHandle: UInt16, valueHandle: UInt16, properties: GATTProperties,
        endHandle: UInt16, descriptors: [GATTDescriptor] = []
    ) {
        self.uuid = uuid
        self.declarationHandle = declarationHandle
        self.valueHandle = valueHandle
        self.properties = properties
        self.endHandle = endHandle
        self.descriptors = descriptors
    }

    /// The Client Characteristic Configuration descriptor, once descriptors were discovered.
    public var cccdHandle: UInt16? {
        descriptors.first { $0.uuid == GATTAttributeType.clientCharacteristicConfiguration }?.handle
    }

    public var description: String {
        "characteristic \(uuid) value @0x\(String(valueHandle, radix: 16)) \(properties)"
    }
}

/// A service found by discovery (Core v5.4 Vol 3 Part G §4.4).
public struct GATTService: Hashable, Sendable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    /// Declaration handle through end group handle.
    public var handleRange: ATTHandleRange
    public var isPrimary: Bool
    public var characteristics: [GATTCharacteristic]

    public init(uuid: BluetoothUUID, handleRange: ATTHandleRange, isPrimary: Bool = true, characteristics: [GATTCharacteristic] = []) {
        self.uuid = uuid
        self.handleRange = handleRange
        self.isPrimary = isPrimary
        self.characteristics = characteristics
    }

    /// The first characteristic with this UUID.
    public func characteristic(_ uuid: BluetoothUUID) -> GATTCharacteristic? {
        characteristics.first { $0.uuid == uuid }
    }

    public var description: String { "service \(uuid) \(handleRange)" }
}
