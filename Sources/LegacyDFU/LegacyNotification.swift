import BLECore

/// A notification from the Legacy DFU Control Point (`ble_dfu.c`, legacy-dfu.md §3.2).
///
///     Response                     10 <request opcode u8> <status u8>
///     Report Received Image Size   10 07 01 <bytes received u32>        (7 bytes)
///     Packet Receipt Notification  11 <bytes received u32>              (5 bytes)
///
/// The byte counts are the firmware bytes the device accepted so far in this bootloader session
/// (`m_num_of_firmware_bytes_rcvd`, never reset before a reset of the device).
public enum LegacyNotification: Hashable, Sendable, CustomStringConvertible {
    case response(request: LegacyOpcode, status: LegacyStatus)
    case receivedImageSize(UInt32)
    case packetReceipt(bytesReceived: UInt32)

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 7)
        switch self {
        case .response(let request, let status):
            w.write(LegacyOpcode.response.rawValue)
            w.write(request.rawValue)
            w.write(status.rawValue)
        case .receivedImageSize(let bytes):
            w.write(LegacyOpcode.response.rawValue)
            w.write(LegacyOpcode.reportReceivedImageSize.rawValue)
            w.write(LegacyStatus.success.rawValue)
            w.write(bytes)
        case .packetReceipt(let bytes):
            w.write(LegacyOpcode.packetReceipt.rawValue)
            w.write(bytes)
        }
        return w.bytes
    }

    /// Strict: the exact lengths above (Android's `getStatusCode` refuses a response that is not 3 bytes).
    public init(decoding bytes: [UInt8]) throws(LegacyDecodingError) {
        var r = ByteReader(bytes)
        guard let first = r.peekUInt8() else { throw LegacyDecodingError(.empty, "notification: no bytes") }
        _ = try? r.readUInt8("opcode")
        do {
            switch LegacyOpcode(rawValue: first) {
            case .response:
                let request = LegacyOpcode(rawValue: try r.readUInt8("request opcode"))
                let status = LegacyStatus(rawValue: try r.readUInt8("status"))
                if request == .reportReceivedImageSize, status == .success {
                    self = .receivedImageSize(try r.readUInt32("bytes received"))
                } else {
                    self = .response(request: request, status: status)
                }
            case .packetReceipt:
                self = .packetReceipt(bytesReceived: try r.readUInt32("bytes received"))
            default:
                throw LegacyDecodingError(.malformed, "notification: first byte 0x\(hex2(first)), expected 0x10 or 0x11")
            }
        } catch let error as LegacyDecodingError {
            throw error
        } catch {
            throw LegacyDecodingError(.truncated, "notification: \(error)")
        }
        guard r.isAtEnd else { throw LegacyDecodingError(.malformed, "notification: \(r.remainingCount) trailing byte(s)") }
    }

    public var description: String {
        switch self {
        case .response(let request, let status): "Response to \(request): \(status)"
        case .receivedImageSize(let bytes): "Received image size \(bytes)"
        case .packetReceipt(let bytes): "Packet receipt: \(bytes) bytes"
        }
    }
}
