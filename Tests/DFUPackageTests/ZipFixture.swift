import BLECore

/// Builds zip archives byte by byte, so that tests can produce both valid packages and every kind of broken one
/// (bad names, duplicates, lying sizes, bad CRCs, unknown methods).
///
/// Local header: `50 4b 03 04, version u16, flags u16, method u16, time u16, date u16, crc u32, csize u32,
/// usize u32, name_len u16, extra_len u16, name, data`. Central header: `50 4b 01 02, made_by u16, version u16,
/// flags u16, method u16, time u16, date u16, crc u32, csize u32, usize u32, name_len u16, extra_len u16,
/// comment_len u16, disk u16, internal u16, external u32, offset u32, name`. End record: `50 4b 05 06, 0, 0,
/// count u16, count u16, cd_size u32, cd_offset u32, comment_len u16`.
struct ZipFixture {
    struct Entry {
        var name: String
        var data: [UInt8]
        /// 0 stored, 8 deflate (written as deflate "stored" blocks), anything else written raw.
        var method: UInt16 = 0
        var crc: UInt32?
        var uncompressedSize: UInt32?
        var compressedSize: UInt32?
        /// Raw compressed payload (overrides the one derived from `data`).
        var payload: [UInt8]?
    }

    var entries: [Entry] = []

    init(_ files: [(name: String, bytes: [UInt8])] = []) {
        entries = files.map { Entry(name: $0.name, data: $0.bytes) }
    }

    mutating func set(_ name: String, _ data: [UInt8]) {
        if let index = entries.firstIndex(where: { $0.name == name }) {
            entries[index].data = data
        } else {
            entries.append(Entry(name: name, data: data))
        }
    }

    mutating func remove(_ name: String) { entries.removeAll { $0.name == name } }

    mutating func modify(_ name: String, _ change: (inout Entry) -> Void) {
        if let index = entries.firstIndex(where: { $0.name == name }) { change(&entries[index]) }
    }

    /// A raw deflate stream made of non-compressed blocks (BTYPE 00): valid input for any inflater.
    static func deflateStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var chunks = stride(from: 0, to: data.count, by: 65535).map { Array(data[$0..<min($0 + 65535, data.count)]) }
        if chunks.isEmpty { chunks = [[]] }
        for (index, chunk) in chunks.enumerated() {
            var w = ByteWriter()
            w.write(UInt8(index == chunks.count - 1 ? 1 : 0))
            w.write(UInt16(chunk.count))
            w.write(~UInt16(chunk.count))
            w.write(contentsOf: chunk)
            out += w.bytes
        }
        return out
    }

    var bytes: [UInt8] {
        var body = ByteWriter()
        var central = ByteWriter()
        for entry in entries {
            let name = Array(entry.name.utf8)
            let payload = entry.payload ?? (entry.method == 8 ? Self.deflateStored(entry.data) : entry.data)
            let crc = entry.crc ?? CRC32.checksum(entry.data)
            let usize = entry.uncompressedSize ?? UInt32(entry.data.count)
            let csize = entry.compressedSize ?? UInt32(payload.count)
            let offset = UInt32(body.bytes.count)
            body.write(UInt32(0x0403_4B50))
            body.write(UInt16(20))
            body.write(UInt16(0x0800))  // UTF-8 names
            body.write(entry.method)
            body.write(UInt16(0))
            body.write(UInt16(0x21))
            body.write(crc)
            body.write(csize)
            body.write(usize)
            body.write(UInt16(name.count))
            body.write(UInt16(0))
            body.write(contentsOf: name)
            body.write(contentsOf: payload)
            central.write(UInt32(0x0201_4B50))
            central.write(UInt16(0x0314))
            central.write(UInt16(20))
            central.write(UInt16(0x0800))
            central.write(entry.method)
            central.write(UInt16(0))
            central.write(UInt16(0x21))
            central.write(crc)
            central.write(csize)
            central.write(usize)
            central.write(UInt16(name.count))
            central.write(UInt16(0))
            central.write(UInt16(0))
            central.write(UInt16(0))
            central.write(UInt16(0))
            central.write(UInt32(0o100644) << 16)
            central.write(offset)
            central.write(contentsOf: name)
        }
        var out = body
        let cdOffset = UInt32(out.bytes.count)
        out.write(contentsOf: central.bytes)
        out.write(UInt32(0x0605_4B50))
        out.write(UInt16(0))
        out.write(UInt16(0))
        out.write(UInt16(entries.count))
        out.write(UInt16(entries.count))
        out.write(UInt32(central.bytes.count))
        out.write(cdOffset)
        out.write(UInt16(0))
        return out.bytes
    }
}
