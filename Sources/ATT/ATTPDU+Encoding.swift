import BLECore

extension ATTPDU {
    /// The PDU as sent: opcode octet, then the parameters laid out as documented on each case, little-endian.
    ///
    /// Encoding cannot fail and knows no ATT_MTU: the caller (the bearer) checks the size against the link.
    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: encodedCapacity)
        writer.write(opcode.rawValue)
        encodeParameters(into: &writer)
        return writer.bytes
    }

    /// Room for the encoded PDU, so that a value-carrying PDU is written without growing its buffer: exact for
    /// the single-value PDUs, a lower bound for the lists.
    private var encodedCapacity: Int {
        switch self {
        case .writeRequest(_, let value), .writeCommand(_, let value), .handleValueNotification(_, let value),
            .handleValueIndication(_, let value):
            3 + value.count
        case .readResponse(let value), .readBlobResponse(let value): 1 + value.count
        case .findByTypeValueRequest(_, _, _, let value): 7 + value.count
        case .unknown(_, let parameters): 1 + parameters.count
        default: 8
        }
    }

    /// A Write Command (opcode 0x52) encoded straight from the bytes of `value`, one allocation and no
    /// intermediate ``ATTPDU`` (the per-packet path of a firmware transfer):
    ///
    ///     52 | handle (UInt16 LE) | value (0 to ATT_MTU - 3 octets)
    ///
    /// Equal to `ATTPDU.writeCommand(handle: handle, value: Array(value)).encoded`.
    public static func encodeWriteCommand(handle: UInt16, value: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 3 + value.count) { buffer, initialized in
            buffer[0] = ATTOpcode.writeCommand.rawValue
            buffer[1] = UInt8(truncatingIfNeeded: handle)
            buffer[2] = UInt8(truncatingIfNeeded: handle >> 8)
            value.withUnsafeBytes { source in
                if let from = source.baseAddress, let to = buffer.baseAddress {
                    UnsafeMutableRawPointer(to + 3).copyMemory(from: from, byteCount: source.count)
                }
            }
            initialized = 3 + value.count
        }
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
