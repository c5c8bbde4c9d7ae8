import BLECore

/// UUIDs of the Secure DFU service (secure-dfu-anchors.md 2.1).
public enum SecureDFUUUID {
    /// The Secure DFU service, in app mode (buttonless) and in bootloader mode.
    public static let service = BluetoothUUID(0xFE59)
    public static let controlPoint = nordic(0x0001)
    /// Write Without Response only on the SDK bootloader.
    public static let packet = nordic(0x0002)
    /// Buttonless DFU without bonds (SDK 13+): the bootloader comes up at address + 1.
    public static let buttonlessWithoutBonds = nordic(0x0003)
    /// Buttonless DFU with bonds (SDK 14+): the bootloader keeps the address.
    public static let buttonlessWithBonds = nordic(0x0004)

    static func nordic(_ short: UInt8) -> BluetoothUUID {
        // 8EC9xxxx-F315-4F60-9FB8-838830DAEA50
        BluetoothUUID(bigEndianBytes: [
            0x8E, 0xC9, 0x00, short, 0xF3, 0x15, 0x4F, 0x60, 0x9F, 0xB8, 0x83, 0x88, 0x30, 0xDA, 0xEA, 0x50,
        ]) ?? BluetoothUUID(0xFE59)
    }
}

/// The UUIDs a Secure DFU device uses: the standard ones (``standard``), or those of a device whose vendor moved the
/// service or its characteristics (issue 20). Codable as `{"service": "…", "control_point": "…", "packet": "…",
/// "buttonless": "…", "buttonless_bonded": "…"}`; a missing key keeps the standard UUID.
public struct SecureDFUUUIDs: Hashable, Sendable, Codable {
    public var service: BluetoothUUID
    public var controlPoint: BluetoothUUID
    public var packet: BluetoothUUID
    public var buttonlessWithoutBonds: BluetoothUUID
    public var buttonlessWithBonds: BluetoothUUID

    public static let standard = SecureDFUUUIDs()

    public init(
        service: BluetoothUUID = SecureDFUUUID.service, controlPoint: BluetoothUUID = SecureDFUUUID.controlPoint,
        packet: BluetoothUUID = SecureDFUUUID.packet,
        buttonlessWithoutBonds: BluetoothUUID = SecureDFUUUID.buttonlessWithoutBonds,
        buttonlessWithBonds: BluetoothUUID = SecureDFUUUID.buttonlessWithBonds
    ) {
        self.service = service
        self.controlPoint = controlPoint
        self.packet = packet
        self.buttonlessWithoutBonds = buttonlessWithoutBonds
        self.buttonlessWithBonds = buttonlessWithBonds
    }

    enum CodingKeys: String, CodingKey {
        case service, packet
        case controlPoint = "control_point"
        case buttonlessWithoutBonds = "buttonless"
        case buttonlessWithBonds = "buttonless_bonded"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let standard = SecureDFUUUIDs()
        service = try container.decodeIfPresent(BluetoothUUID.self, forKey: .service) ?? standard.service
        controlPoint = try container.decodeIfPresent(BluetoothUUID.self, forKey: .controlPoint) ?? standard.controlPoint
        packet = try container.decodeIfPresent(BluetoothUUID.self, forKey: .packet) ?? standard.packet
        buttonlessWithoutBonds =
            try container.decodeIfPresent(BluetoothUUID.self, forKey: .buttonlessWithoutBonds) ?? standard.buttonlessWithoutBonds
        buttonlessWithBonds =
            try container.decodeIfPresent(BluetoothUUID.self, forKey: .buttonlessWithBonds) ?? standard.buttonlessWithBonds
    }
}

/// A request to a buttonless DFU characteristic (SDK `ble_dfu.c`).
///
///     Enter bootloader        01
///     Set advertisement name  02 <len u8> <name, 1..20 bytes>   (without-bonds characteristic only)
public enum ButtonlessRequest: Hashable, Sendable {
    case enterBootloader
    case setAdvertisementName(String)
    case unknown(opcode: UInt8, parameters: [UInt8])

    /// `NRF_DFU_ADV_NAME_MAX_LENGTH`.
    public static let maximumNameLength = 20

    public var opcode: UInt8 {
        switch self {
        case .enterBootloader: 0x01
        case .setAdvertisementName: 0x02
        case .unknown(let opcode, _): opcode
        }
    }

    public var encoded: [UInt8] {
        switch self {
        case .enterBootloader: return [0x01]
        case .setAdvertisementName(let name):
            let utf8 = Array(name.utf8)
            return [0x02, UInt8(truncatingIfNeeded: utf8.count)] + utf8
        case .unknown(let opcode, let parameters): return [opcode] + parameters
        }
    }

    public init(decoding bytes: [UInt8]) throws(DFUDecodingError) {
        var r = ByteReader(bytes)
        guard let opcode = r.peekUInt8() else { throw DFUDecodingError(.empty, "buttonless request: no bytes") }
        _ = try? r.readUInt8("opcode")
        switch opcode {
        case 0x01:
            guard r.isAtEnd else { throw DFUDecodingError(.malformed, "buttonless enter bootloader: trailing bytes") }
            self = .enterBootloader
        case 0x02:
            do {
                let length = Int(try r.readUInt8("name length"))
                let name = try r.readBytes(length, "advertisement name")
                guard r.isAtEnd else { throw DFUDecodingError(.malformed, "buttonless set name: trailing bytes") }
                self = .setAdvertisementName(String(decoding: name, as: UTF8.self))
            } catch let error as ByteReader.Truncated {
                throw DFUDecodingError.from(error, in: "buttonless set name")
            } catch let error as DFUDecodingError {
                throw error
            } catch {
                throw DFUDecodingError(.malformed, "buttonless set name: \(error)")
            }
        default: self = .unknown(opcode: opcode, parameters: r.readRemaining())
        }
    }
}

/// Status of a buttonless response indication `20 <op> <status>`.
public struct ButtonlessStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let success = ButtonlessStatus(rawValue: 0x01)
    public static let opCodeNotSupported = ButtonlessStatus(rawValue: 0x02)
    public static let operationFailed = ButtonlessStatus(rawValue: 0x04)
    public static let invalidAdvertisementName = ButtonlessStatus(rawValue: 0x05)
    public static let busy = ButtonlessStatus(rawValue: 0x06)
    public static let notBonded = ButtonlessStatus(rawValue: 0x07)

    public var description: String {
        let name: String? =
            switch rawValue {
            case 0x01: "success"
            case 0x02: "opcode not supported"
            case 0x04: "operation failed"
            case 0x05: "invalid advertisement name"
            case 0x06: "busy"
            case 0x07: "not bonded"
            default: nil
            }
        return "\(name ?? "unknown status") (0x\(hex2(rawValue)))"
    }
}

/// The indication a buttonless characteristic sends back: `20 <request opcode> <status>`.
public struct ButtonlessResponse: Hashable, Sendable {
    public var requestOpcode: UInt8
    public var status: ButtonlessStatus

    public init(requestOpcode: UInt8, status: ButtonlessStatus) {
        self.requestOpcode = requestOpcode
        self.status = status
    }

    public var encoded: [UInt8] { [0x20, requestOpcode, status.rawValue] }

    public init(decoding bytes: [UInt8]) throws(DFUDecodingError) {
        guard !bytes.isEmpty else { throw DFUDecodingError(.empty, "buttonless response: no bytes") }
        guard bytes[0] == 0x20 else {
            throw DFUDecodingError(.malformed, "buttonless response: first byte 0x\(hex2(bytes[0])), expected 0x20")
        }
        guard bytes.count >= 3 else {
            throw DFUDecodingError(.truncated, "buttonless response: needs 3 bytes, has \(bytes.count)")
        }
        guard bytes.count == 3 else { throw DFUDecodingError(.malformed, "buttonless response: trailing bytes") }
        requestOpcode = bytes[1]
        status = ButtonlessStatus(rawValue: bytes[2])
    }
}
