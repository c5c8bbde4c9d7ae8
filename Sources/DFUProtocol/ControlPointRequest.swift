import BLECore

/// A request written to the DFU Control Point (8EC90001) with a Write Request.
///
/// Layouts (little-endian; nRF5 SDK 15-17 `nrf_dfu_req_handler`, secure-dfu-anchors.md 2.2):
///
///     Protocol Version    00
///     Create              01 <type u8> <size u32>
///     Set PRN             02 <prn u16>              (0 = off)
///     Calculate Checksum  03
///     Execute             04
///     Select              06 <type u8>
///     Get MTU             07                        (serial transports)
///     Write               08 <data…>                (serial transports; over BLE data goes to the Packet char)
///     Ping                09 <id u8>
///     Hardware Version    0A
///     Firmware Version    0B <image u8>
///     Abort               0C
public enum ControlPointRequest: Hashable, Sendable, CustomStringConvertible {
    case protocolVersion
    case create(type: DFUObjectType, size: UInt32)
    case setPRN(UInt16)
    case calculateChecksum
    case execute
    case select(DFUObjectType)
    case getMTU
    case write([UInt8])
    case ping(UInt8)
    case hardwareVersion
    case firmwareVersion(image: UInt8)
    case abort
    /// Any other opcode, kept with its parameters.
    case unknown(opcode: DFUOpcode, parameters: [UInt8])

    public var opcode: DFUOpcode {
        switch self {
        case .protocolVersion: .protocolVersion
        case .create: .create
        case .setPRN: .setPRN
        case .calculateChecksum: .calculateChecksum
        case .execute: .execute
        case .select: .select
        case .getMTU: .getMTU
        case .write: .write
        case .ping: .ping
        case .hardwareVersion: .hardwareVersion
        case .firmwareVersion: .firmwareVersion
        case .abort: .abort
        case .unknown(let opcode, _): opcode
        }
    }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 6)
        w.write(opcode.rawValue)
        switch self {
        case .protocolVersion, .calculateChecksum, .execute, .getMTU, .hardwareVersion, .abort: break
        case .create(let type, let size):
            w.write(type.rawValue)
            w.write(size)
        case .setPRN(let value): w.write(value)
        case .select(let type): w.write(type.rawValue)
        case .write(let data): w.write(contentsOf: data)
        case .ping(let id): w.write(id)
        case .firmwareVersion(let image): w.write(image)
        case .unknown(_, let parameters): w.write(contentsOf: parameters)
        }
        return w.bytes
    }

    /// Strict decoding: fixed-size requests with trailing bytes are malformed.
    public init(decoding bytes: [UInt8]) throws(DFUDecodingError) {
        var r = ByteReader(bytes)
        guard let first = r.peekUInt8() else { throw DFUDecodingError(.empty, "control point request: no bytes") }
        _ = try? r.readUInt8("opcode")
        let opcode = DFUOpcode(rawValue: first)
        let name = "control point request \(opcode)"
        do {
            switch opcode {
            case .protocolVersion: self = .protocolVersion
            case .create:
                let type = DFUObjectType(rawValue: try r.readUInt8("object type"))
                self = .create(type: type, size: try r.readUInt32("object size"))
            case .setPRN: self = .setPRN(try r.readUInt16("PRN value"))
            case .calculateChecksum: self = .calculateChecksum
            case .execute: self = .execute
            case .select: self = .select(DFUObjectType(rawValue: try r.readUInt8("object type")))
            case .getMTU: self = .getMTU
            case .write: self = .write(r.readRemaining())
            case .ping: self = .ping(try r.readUInt8("ping id"))
            case .hardwareVersion: self = .hardwareVersion
            case .firmwareVersion: self = .firmwareVersion(image: try r.readUInt8("image number"))
            case .abort: self = .abort
            default: self = .unknown(opcode: opcode, parameters: r.readRemaining())
            }
        } catch {
            throw DFUDecodingError.from(error, in: name)
        }
        guard r.isAtEnd else {
            throw DFUDecodingError(.malformed, "\(name): \(r.remainingCount) unexpected trailing byte(s)")
        }
    }

    public var description: String {
        switch self {
        case .create(let type, let size): "Create \(type) object, size \(size)"
        case .setPRN(let value): "Set PRN \(value)"
        case .select(let type): "Select \(type) object"
        case .write(let data): "Write \(data.count) byte(s)"
        case .ping(let id): "Ping \(id)"
        case .firmwareVersion(let image): "Firmware Version of image \(image)"
        case .unknown(let opcode, let parameters): "\(opcode) \(parameters.hexString)"
        default: opcode.name ?? opcode.description
        }
    }
}
