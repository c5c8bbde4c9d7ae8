import BLECore

/// One Handles Information entry of a Find By Type Value Response (Core v5.x Vol 3 Part F §3.4.3.4):
///
///     Found Attribute Handle (2) | Group End Handle (2)
public struct ATTHandleRange: Hashable, Sendable, CustomStringConvertible {
    /// The Found Attribute Handle.
    public var start: UInt16
    /// The Group End Handle (equal to `start` for an attribute that is not a grouping attribute).
    public var end: UInt16

    public init(start: UInt16, end: UInt16) {
        self.start = start
        self.end = end
    }

    /// "0x0010-0x0018".
    public var description: String { "\(hex4(start))-\(hex4(end))" }
}

/// One Information Data entry of a Find Information Response (Core v5.x Vol 3 Part F §3.4.3.2):
///
///     Handle (2) | Attribute Type (2 in format 0x01, 16 in format 0x02)
public struct ATTHandleUUID: Hashable, Sendable, CustomStringConvertible {
    public var handle: UInt16
    public var uuid: BluetoothUUID

    public init(handle: UInt16, uuid: BluetoothUUID) {
        self.handle = handle
        self.uuid = uuid
    }

    /// "0x0003 2902".
    public var description: String { "\(hex4(handle)) \(uuid)" }
}

/// One Attribute Data entry of a Read By Type Response (Core v5.x Vol 3 Part F §3.4.4.2):
///
///     Attribute Handle (2) | Attribute Value (Length - 2)
public struct ATTHandleValue: Hashable, Sendable, CustomStringConvertible {
    public var handle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }

    /// "0x0002: 0A 03 00 00 2A".
    public var description: String { "\(hex4(handle)): \(traceHex(value))" }
}

/// One Attribute Data entry of a Read By Group Type Response (Core v5.x Vol 3 Part F §3.4.4.10):
///
///     Attribute Handle (2) | End Group Handle (2) | Attribute Value (Length - 4)
public struct ATTGroupValue: Hashable, Sendable, CustomStringConvertible {
    public var handle: UInt16
    public var endGroupHandle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, endGroupHandle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.endGroupHandle = endGroupHandle
        self.value = value
    }

    /// "0x0001-0x0007: 00 18".
    public var description: String { "\(hex4(handle))-\(hex4(endGroupHandle)): \(traceHex(value))" }
}
