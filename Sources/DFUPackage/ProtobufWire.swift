/// A minimal protocol-buffers wire-format reader and writer, enough for `dfu-cc.proto` (proto2).
///
/// Wire layout: every field is `key = varint(field_number << 3 | wire_type)` followed by
/// - wire type 0: a varint (little-endian base-128, at most 10 bytes),
/// - wire type 1: 8 bytes, wire type 5: 4 bytes,
/// - wire type 2: `varint(length)` then `length` bytes (sub-messages, bytes, packed repeated scalars).
/// Groups (wire types 3 and 4) are rejected. Unknown fields of known wire types are skipped.
///
/// The walk is done by hand (not swift-protobuf's generated code) because signature verification needs the
/// init command's bytes exactly as they sit in the file, and nrfutil's byte-exact output needs every field written
/// explicitly in field-number order.
struct ProtobufReader {
    enum WireType: UInt8 { case varint = 0, fixed64 = 1, lengthDelimited = 2, fixed32 = 5 }

    struct Field {
        var number: UInt32
        var wireType: WireType
        /// The varint value (wire type 0) or the fixed value (1, 5); 0 for length-delimited.
        var value: UInt64
        /// The payload of a length-delimited field, as a slice of the input (indices of the input).
        var payload: ArraySlice<UInt8>
    }

    let bytes: ArraySlice<UInt8>
    private(set) var index: Int
    /// Used in error messages ("InitCommand").
    let context: String

    init(_ bytes: ArraySlice<UInt8>, context: String) {
        self.bytes = bytes
        self.index = bytes.startIndex
        self.context = context
    }

    var isAtEnd: Bool { index >= bytes.endIndex }

    mutating func readVarint() throws(PackageError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.endIndex else {
                throw PackageError(.invalidInitPacket, "\(context): truncated varint at offset \(index - bytes.startIndex)")
            }
            let byte = bytes[index]
            index += 1
            if shift == 63 && byte > 1 {
                throw PackageError(.invalidInitPacket, "\(context): varint longer than 64 bits")
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw PackageError(.invalidInitPacket, "\(context): varint longer than 10 bytes") }
        }
    }

    /// The next field, or nil at the end of the input.
    mutating func next() throws(PackageError) -> Field? {
        guard !isAtEnd else { return nil }
        let key = try readVarint()
        let number = key >> 3
        guard number > 0, number <= 0x1FFF_FFFF else {
            throw PackageError(.invalidInitPacket, "\(context): invalid field number \(number)")
        }
        guard let wireType = WireType(rawValue: UInt8(key & 7)) else {
            throw PackageError(.invalidInitPacket, "\(context): unsupported wire type \(key & 7) for field \(number)")
        }
        var field = Field(number: UInt32(number), wireType: wireType, value: 0, payload: [])
        switch wireType {
        case .varint:
            field.value = try readVarint()
        case .fixed64, .fixed32:
            let size = wireType == .fixed64 ? 8 : 4
            guard bytes.endIndex - index >= size else {
                throw PackageError(.invalidInitPacket, "\(context): truncated field \(number)")
            }
            for i in 0..<size { field.value |= UInt64(bytes[index + i]) << (8 * UInt64(i)) }
            index += size
        case .lengthDelimited:
            let length = try readVarint()
            guard length <= UInt64(bytes.endIndex - index) else {
                throw PackageError(
                    .invalidInitPacket, "\(context): field \(number) length \(length) exceeds the \(bytes.endIndex - index) bytes left")
            }
            field.payload = bytes[index..<index + Int(length)]
            index += Int(length)
        }
        return field
    }
}

extension ProtobufReader.Field {
    /// The varint value of a scalar field, truncated to 32 bits as protobuf does for `uint32` and enums.
    func uint32(_ context: String) throws(PackageError) -> UInt32 {
        guard wireType == .varint else {
            throw PackageError(.invalidInitPacket, "\(context): field \(number) has wire type \(wireType.rawValue), expected varint")
        }
        return UInt32(truncatingIfNeeded: value)
    }

    func bytes(_ context: String) throws(PackageError) -> ArraySlice<UInt8> {
        guard wireType == .lengthDelimited else {
            throw PackageError(.invalidInitPacket, "\(context): field \(number) has wire type \(wireType.rawValue), expected bytes")
        }
        return payload
    }
}

/// Writes protobuf fields in the order they are called.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    mutating func writeVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func writeVarint(field: UInt32, _ value: UInt64) {
        writeVarint(UInt64(field) << 3)
        writeVarint(value)
    }

    mutating func writeBytes<C: Collection>(field: UInt32, _ payload: C) where C.Element == UInt8 {
        writeVarint(UInt64(field) << 3 | 2)
        writeVarint(UInt64(payload.count))
        bytes.append(contentsOf: payload)
    }
}
