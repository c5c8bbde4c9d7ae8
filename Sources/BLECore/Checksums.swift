/// CRC-32/ISO-HDLC (zlib's `crc32`): reflected polynomial 0xEDB88320, init and final XOR 0xFFFFFFFF.
/// Secure DFU checksums are this CRC over all firmware bytes from offset 0, running across objects.
public struct CRC32: Sendable, Hashable {
    /// The running value as zlib reports it (final XOR applied), so `CRC32(continuing: x)` chains like
    /// `zlib.crc32(data, x)`.
    public private(set) var value: UInt32

    public init() { value = 0 }
    public init(continuing value: UInt32) { self.value = value }

    static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var c = UInt32(i)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    public mutating func update<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        var c = ~value
        let table = Self.table
        for byte in bytes { c = table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        value = ~c
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
