import BLECore

/// The 8-byte header in front of every SMP message (smp-mcuboot.md §2.1; Zephyr `smp_protocol.rst`, `smp.c`).
///
///     byte 0   Res (bits 7-5) | Ver (bits 4-3) | OP (bits 2-0)
///     byte 1   Flags
///     byte 2-3 Data length (big-endian): the CBOR body that follows, header excluded
///     byte 4-5 Group ID (big-endian)
///     byte 6   Sequence number (echoed by the server)
///     byte 7   Command ID
///
/// SMP integers are big-endian (unlike ATT and MCUboot). Unknown operations, versions, groups and reserved bits
/// survive decoding, so a frame re-encodes to the same bytes.
public struct SMPHeader: Hashable, Sendable, CustomStringConvertible {
    public static let size = 8

    public var operation: SMPOperation
    public var version: SMPVersion
    /// The 3 reserved high bits of byte 0 (0 in every known server).
    public var reserved: UInt8
    public var flags: UInt8
    /// Length of the CBOR body.
    public var length: UInt16
    public var group: SMPGroup
    public var sequence: UInt8
    public var command: UInt8

    public init(
        operation: SMPOperation, version: SMPVersion = .v2, flags: UInt8 = 0, length: UInt16 = 0, group: SMPGroup,
        sequence: UInt8, command: UInt8, reserved: UInt8 = 0
    ) {
        self.operation = operation
        self.version = version
        self.reserved = reserved
        self.flags = flags
        self.length = length
        self.group = group
        self.sequence = sequence
        self.command = command
    }

    /// Decodes the first 8 bytes; throws `ByteReader.Truncated` when fewer are given.
    public init(decoding bytes: ArraySlice<UInt8>) throws(ByteReader.Truncated) {
        guard bytes.count >= Self.size else {
            throw ByteReader.Truncated(field: "SMP header", needed: Self.size, available: bytes.count)
        }
        let b = Array(bytes.prefix(Self.size))
        operation = SMPOperation(rawValue: b[0] & 0x07)
        version = SMPVersion(rawValue: (b[0] >> 3) & 0x03)
        reserved = b[0] >> 5
        flags = b[1]
        length = UInt16(b[2]) << 8 | UInt16(b[3])
        group = SMPGroup(rawValue: UInt16(b[4]) << 8 | UInt16(b[5]))
        sequence = b[6]
        command = b[7]
    }

    public var encoded: [UInt8] {
        [
            (reserved & 0x07) << 5 | (version.rawValue & 0x03) << 3 | (operation.rawValue & 0x07), flags,
            UInt8(length >> 8), UInt8(length & 0xFF), UInt8(group.rawValue >> 8), UInt8(group.rawValue & 0xFF),
            sequence, command,
        ]
    }

    public var description: String {
        "\(operation) \(version) group \(group) command \(command) seq \(sequence) length \(length)"
    }
}

/// The OP field (3 bits). Open: unknown values survive.
public struct SMPOperation: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let read = SMPOperation(rawValue: 0)
    public static let readResponse = SMPOperation(rawValue: 1)
    public static let write = SMPOperation(rawValue: 2)
    public static let writeResponse = SMPOperation(rawValue: 3)

    /// The response operation a server answers this request operation with (`smp.c`: read → 1, write → 3).
    public var response: SMPOperation? {
        switch self {
        case .read: .readResponse
        case .write: .writeResponse
        default: nil
        }
    }

    public var isResponse: Bool { self == .readResponse || self == .writeResponse }

    public var description: String {
        switch self {
        case .read: "read"
        case .readResponse: "read-response"
        case .write: "write"
        case .writeResponse: "write-response"
        default: "op\(rawValue)"
        }
    }
}

/// The Ver field (2 bits): 0 is the original protocol (SMP v1), 1 is SMP v2 (group errors as `err`).
public struct SMPVersion: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let v1 = SMPVersion(rawValue: 0)
    public static let v2 = SMPVersion(rawValue: 1)
    public static func < (lhs: SMPVersion, rhs: SMPVersion) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "v\(Int(rawValue) + 1)" }
}

/// The management group (smp-mcuboot.md §2.2). Open: user groups (64+) survive.
public struct SMPGroup: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public static let os = SMPGroup(rawValue: 0)
    public static let image = SMPGroup(rawValue: 1)
    public static let statistics = SMPGroup(rawValue: 2)
    public static let settings = SMPGroup(rawValue: 3)
    public static let fileSystem = SMPGroup(rawValue: 8)
    public static let shell = SMPGroup(rawValue: 9)
    public static let zephyrBasic = SMPGroup(rawValue: 63)

    public var description: String {
        switch self {
        case .os: "os"
        case .image: "image"
        case .statistics: "stat"
        case .settings: "settings"
        case .fileSystem: "fs"
        case .shell: "shell"
        case .zephyrBasic: "zephyr"
        default: "group\(rawValue)"
        }
    }
}

/// Command IDs of the groups used for firmware update (`smp_group_0.rst`, `smp_group_1.rst`).
public enum SMPCommand {
    public enum OS {
        public static let echo: UInt8 = 0
        public static let reset: UInt8 = 5
        public static let mcumgrParameters: UInt8 = 6
        public static let bootloaderInfo: UInt8 = 8
    }

    public enum Image {
        public static let state: UInt8 = 0
        public static let upload: UInt8 = 1
        public static let erase: UInt8 = 5
        public static let slotInfo: UInt8 = 6
    }
}
