/// CRC-32/ISO-HDLC (zlib's `crc32`): reflected polynomial 0xEDB88320, init and final XOR 0xFFFFFFFF.
/// Secure DFU checksums are this CRC over all firmware bytes from offset 0, running across objects.
public struct CRC32: Sendable, Hashable {
    /// The running value as zlib reports it (final XOR applied), so `CRC32(continuing: x)` chains like
    /// `zlib.crc32(data, x)`.
    public private(set) var value: UInt32

    public init() { value = 0 }
    public init(continuing value: UInt32) { self.value = value }

    /// Slicing-by-8 tables: `tables[0]` is the classic byte table, `tables[k][i]` is `tables[0][i]` advanced by k
    /// zero bytes, so eight input bytes cost eight lookups and no branch.
    static let tables: [[UInt32]] = {
        var first = [UInt32](repeating: 0, count: 256)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            first[i] = c
        }
        var tables = [first]
        for k in 1..<8 {
            let previous = tables[k - 1]
            tables.append((0..<256).map { i in first[Int(previous[i] & 0xFF)] ^ (previous[i] >> 8) })
        }
        return tables
    }()

    /// Contiguous input (Array, Data, slices, buffers) takes the slicing-by-8 path with no allocation; other
    /// collections go byte by byte.
    public mutating func update<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        let start = value
        if let updated = bytes.withContiguousStorageIfAvailable({ Self.update(start, $0) }) {
            value = updated
        } else {
            value = Array(bytes).withUnsafeBufferPointer { Self.update(start, $0) }
        }
    }

    /// The running value after `buffer`, from the running value `value` (both with the final XOR applied).
    public static func update(_ value: UInt32, _ buffer: UnsafeBufferPointer<UInt8>) -> UInt32 {
        var c = ~value
        var index = 0
        let count = buffer.count
        tables.withUnsafeBufferPointer { t in
            let t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5], t6 = t[6], t7 = t[7]
            t0.withUnsafeBufferPointer { t0 in
                while index + 8 <= count {
                    let low = c ^ (UInt32(buffer[index]) | UInt32(buffer[index + 1]) << 8
                        | UInt32(buffer[index + 2]) << 16 | UInt32(buffer[index + 3]) << 24)
                    let high = UInt32(buffer[index + 4]) | UInt32(buffer[index + 5]) << 8
                        | UInt32(buffer[index + 6]) << 16 | UInt32(buffer[index + 7]) << 24
                    c = t7[Int(low & 0xFF)] ^ t6[Int((low >> 8) & 0xFF)] ^ t5[Int((low >> 16) & 0xFF)]
                        ^ t4[Int(low >> 24)] ^ t3[Int(high & 0xFF)] ^ t2[Int((high >> 8) & 0xFF)]
                        ^ t1[Int((high >> 16) & 0xFF)] ^ t0[Int(high >> 24)]
                    index += 8
                }
                while index < count {
                    c = t0[Int((c ^ UInt32(buffer[index])) & 0xFF)] ^ (c >> 8)
                    index += 1
                }
            }
        }
        return ~c
    }

    public static func checksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }
}

/// CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF): the nRF5 SDK's `crc16_compute`, used by Legacy DFU init packets.
public enum CRC16 {
    public static func ccittFalse<C: Collection>(_ bytes: C, initial: UInt16 = 0xFFFF) -> UInt16 where C.Element == UInt8 {
        var crc = initial
        for byte in bytes {
            crc = (crc >> 8) | (crc << 8)
            crc ^= UInt16(byte)
            crc ^= (crc & 0xFF) >> 4
            crc ^= (crc << 8) << 4
            crc ^= ((crc & 0xFF) << 4) << 1
        }
        return crc
    }
}
