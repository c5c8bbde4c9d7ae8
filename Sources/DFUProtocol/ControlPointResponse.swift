import BLECore

/// A notification from the DFU Control Point: the response to a request, or a Packet Receipt Notification.
///
///     60 <request opcode u8> <result u8> [payload]
///     60 <request opcode u8> 0B <extended error u8>            (result 0x0B)
///
/// Payloads on success over BLE (SDK 16 `nrf_dfu_ble.c`): Select `max_size u32, offset u32, crc u32`;
/// Calculate Checksum `offset u32, crc u32`. A PRN is byte-identical to a Calculate Checksum response
/// (`60 03 01 <offset> <crc>`): the client tells them apart by its own state. Other opcodes carry no payload over
/// BLE; a payload present anyway is kept in ``payload``.
public struct ControlPointResponse: Hashable, Sendable, CustomStringConvertible {
    public var request: DFUOpcode
    public var status: DFUStatus
    /// Bytes after the result (after the extended code for extended errors).
    public var payload: [UInt8]

    public init(request: DFUOpcode, status: DFUStatus, payload: [UInt8] = []) {
        self.request = request
        self.status = status
        self.payload = payload
    }

    /// The Calculate Checksum response, also sent as a Packet Receipt Notification.
    public static func checksum(offset: UInt32, crc: UInt32) -> ControlPointResponse {
        var w = ByteWriter(capacity: 8)
        w.write(offset)
        w.write(crc)
        return ControlPointResponse(request: .calculateChecksum, status: .success, payload: w.bytes)
    }

    /// The Select response.
    public static func select(maxSize: UInt32, offset: UInt32, crc: UInt32) -> ControlPointResponse {
        var w = ByteWriter(capacity: 12)
        w.write(maxSize)
        w.write(offset)
        w.write(crc)
        return ControlPointResponse(request: .select, status: .success, payload: w.bytes)
    }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 3 + payload.count)
        w.write(DFUOpcode.response.rawValue)
        w.write(request.rawValue)
        switch status {
        case .success: w.write(DFUResultCode.success.rawValue)
        case .failure(let code): w.write(code.rawValue)
        case .extended(let ext):
            w.write(DFUResultCode.extendedError.rawValue)
            w.write(ext.rawValue)
        }
        w.write(contentsOf: payload)
        return w.bytes
    }

    public init(decoding bytes: [UInt8]) throws(DFUDecodingError) {
        var r = ByteReader(bytes)
        do {
            guard !bytes.isEmpty else { throw DFUDecodingError(.empty, "control point response: no bytes") }
            let marker = try r.readUInt8("response opcode")
            guard marker == DFUOpcode.response.rawValue else {
                throw DFUDecodingError(.malformed, "control point response: first byte 0x\(hex2(marker)), expected 0x60")
            }
            request = DFUOpcode(rawValue: try r.readUInt8("request opcode"))
            let result = DFUResultCode(rawValue: try r.readUInt8("result code"))
            switch result {
            case .success: status = .success
            case .extendedError: status = .extended(DFUExtendedError(rawValue: try r.readUInt8("extended error")))
            default: status = .failure(result)
            }
            payload = r.readRemaining()
        } catch let error as ByteReader.Truncated {
            throw DFUDecodingError.from(error, in: "control point response")
        } catch let error as DFUDecodingError {
            throw error
        } catch {
            throw DFUDecodingError(.malformed, "control point response: \(error)")
        }
    }

    /// Offset and CRC of a successful Calculate Checksum response or PRN.
    public func checksumPayload() throws(DFUDecodingError) -> (offset: UInt32, crc: UInt32) {
        var r = ByteReader(payload)
        do {
            let offset = try r.readUInt32("offset")
            let crc = try r.readUInt32("CRC")
            return (offset, crc)
        } catch {
            throw DFUDecodingError.from(error, in: "checksum response")
        }
    }

    /// Maximum size, offset and CRC of a successful Select response.
    public func selectPayload() throws(DFUDecodingError) -> ObjectInfo {
        var r = ByteReader(payload)
        do {
            return ObjectInfo(
                maxSize: try r.readUInt32("max size"), offset: try r.readUInt32("offset"), crc: try r.readUInt32("CRC"))
        } catch {
            throw DFUDecodingError.from(error, in: "select response")
        }
    }

    public var description: String {
        var text = "Response to \(request): \(status)"
        if !payload.isEmpty { text += " [\(payload.hexString)]" }
        return text
    }
}

/// What Select reports about the current object of a type.
public struct ObjectInfo: Hashable, Sendable, CustomStringConvertible {
    public var maxSize: UInt32
    public var offset: UInt32
    public var crc: UInt32

    public init(maxSize: UInt32, offset: UInt32, crc: UInt32) {
        self.maxSize = maxSize
        self.offset = offset
        self.crc = crc
    }

    public var description: String {
        "max size \(maxSize), offset \(offset), CRC 0x\(String(crc, radix: 16, uppercase: true))"
    }
}
