import BLECore

extension ATTPDU {
    /// The PDU as sent: opcode octet, then the parameters laid out as documented on each case, little-endian.
    ///
    /// Encoding cannot fail and knows no ATT_MTU: the caller (the bearer) checks the size against the link.
    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: 8)
        writer.write(opcode.rawValue)
        encodeParameters(into: &writer)
        return writer.bytes
    }

    private func encodeParameters(into writer: inout ByteWriter) {
        switch self {
        case .errorResponse(let requestOpcode, let handle, let error):
            writer.write(requestOpcode.rawValue)
            writer.write(handle)
            writer.write(error.rawValue)
        case .exchangeMTURequest(let mtu), .exchangeMTUResponse(let mtu):
            writer.write(mtu)
        case .findInformationRequest(let start, let end):
            writer.write(start)
            writer.write(end)
        case .findInformationResponse(let entries):
            // Format 0x01 only if every UUID fits in 16 bits, else 0x02 for all (§3.4.3.2).
            let short = entries.allSatisfy { $0.uuid.uuid16 != nil }
            writer.write(short ? UInt8(0x01) : UInt8(0x02))
            for entry in entries {
                writer.write(entry.handle)
                writer.write(contentsOf: short ? entry.uuid.shortestLittleEndianBytes : entry.uuid.littleEndian128)
            }
        case .findByTypeValueRequest(let start, let end, let type, let value):
            writer.write(start)
            writer.write(end)
            writer.write(type)
            writer.write(contentsOf: value)
        case .findByTypeValueResponse(let ranges):
            for range in ranges {
                writer.write(range.start)
                writer.write(range.end)
            }
        case .readByTypeRequest(let start, let end, let type), .readByGroupTypeRequest(let start, let end, let type):
            writer.write(start)
            writer.write(end)
            writer.write(contentsOf: type.shortestLittleEndianBytes)
        case .readByTypeResponse(let entries):
            // Length = 2 + value length of the first entry; callers keep all entries the same length (§3.4.4.2).
            writer.write(UInt8(truncatingIfNeeded: 2 + (entries.first?.value.count ?? 0)))
            for entry in entries {
                writer.write(entry.handle)
                writer.write(contentsOf: entry.value)
            }
        case .readByGroupTypeResponse(let entries):
            // Length = 4 + value length of the first entry (§3.4.4.10).
            writer.write(UInt8(truncatingIfNeeded: 4 + (entries.first?.value.count ?? 0)))
            for entry in entries {
                writer.write(entry.handle)
                writer.write(entry.endGroupHandle)
                writer.write(contentsOf: entry.value)
            }
        case .readRequest(let handle):
            writer.write(handle)
        case .readBlobRequest(let handle, let offset):
            writer.write(handle)
            writer.write(offset)
        case .readResponse(let value), .readBlobResponse(let value):
            writer.write(contentsOf: value)
        case .writeRequest(let handle, let value), .writeCommand(let handle, let value),
            .handleValueNotification(let handle, let value), .handleValueIndication(let handle, let value):
            writer.write(handle)
            writer.write(contentsOf: value)
        case .writeResponse, .handleValueConfirmation:
            break
        case .unknown(_, let parameters):
            writer.write(contentsOf: parameters)
        }
    }
}
