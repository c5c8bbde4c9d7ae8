import BLECore
import Foundation

/// Structural bounds check of a zip before ZIPFoundation sees it. ZIPFoundation's in-memory reader traps on
/// offsets past the end of the data (found by tools/fuzz-package), so every record it will read is checked here:
///
/// ```
/// end record      50 4b 05 06, disk u16, cd disk u16, entries on disk u16, entries u16, cd size u32, cd offset u32,
///                 comment length u16
/// central header  50 4b 01 02, 24 bytes, csize u32 @20, usize u32 @24, name u16 @28, extra u16 @30,
///                 comment u16 @32, 8 bytes, local offset u32 @42, then name, extra, comment (46 + n bytes)
/// local header    50 4b 03 04, 22 bytes, name u16 @26, extra u16 @28, then name, extra, data (csize bytes)
/// ```
/// ZIP64 (any 0xFFFF/0xFFFFFFFF marker), multi-disk archives and overlapping ranges are rejected.
enum ArchiveBounds {
    static func check(_ data: Data) throws(PackageError) {
        let bytes = [UInt8](data)
        guard let end = endRecordOffset(bytes) else {
            throw PackageError(.invalidArchive, "not a zip archive (no end of central directory record)")
        }
        do {
            var r = ByteReader(bytes[(end + 4)...])
            let disk = try r.readUInt16("disk"), cdDisk = try r.readUInt16("cd disk")
            let onDisk = try r.readUInt16("entries on disk"), count = try r.readUInt16("entries")
            let cdSize = try r.readUInt32("cd size"), cdOffset = try r.readUInt32("cd offset")
            guard disk == 0, cdDisk == 0, onDisk == count, count != 0xFFFF, cdOffset != 0xFFFF_FFFF else {
                throw PackageError(.invalidArchive, "not a zip archive this tool reads (multi-disk or ZIP64)")
            }
            guard Int(cdOffset) + Int(cdSize) <= end else {
                throw PackageError(.invalidArchive, "zip central directory lies outside the archive (truncated?)")
            }
            var cd = ByteReader(bytes[Int(cdOffset)..<(Int(cdOffset) + Int(cdSize))])
            for _ in 0..<count {
                guard try cd.readUInt32("signature") == 0x0201_4B50 else {
                    throw PackageError(.invalidArchive, "zip central directory is corrupt")
                }
                let fixed = try cd.readBytes(42, "central header")
                func u16(_ at: Int) -> Int { Int(fixed[at - 4]) | Int(fixed[at - 3]) << 8 }
                func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
                let csize = u32(20), usize = u32(24), local = u32(42)
                guard csize != 0xFFFF_FFFF, usize != 0xFFFF_FFFF, local != 0xFFFF_FFFF else {
                    throw PackageError(.invalidArchive, "zip entry uses ZIP64, which this tool does not read")
                }
                _ = try cd.readBytes(u16(28) + u16(30) + u16(32), "central names")
                guard local + 30 <= Int(cdOffset), bytes[local..<(local + 4)].elementsEqual([0x50, 0x4B, 0x03, 0x04]) else {
                    throw PackageError(.invalidArchive, "zip local header at \(local) is missing (truncated?)")
                }
                let nameLength = Int(bytes[local + 26]) | Int(bytes[local + 27]) << 8
                let extraLength = Int(bytes[local + 28]) | Int(bytes[local + 29]) << 8
                guard local + 30 + nameLength + extraLength + csize <= Int(cdOffset) else {
                    throw PackageError(.invalidArchive, "zip entry at \(local) runs past its data (truncated?)")
                }
            }
        } catch let error as ByteReader.Truncated {
            throw PackageError(.invalidArchive, "zip central directory is truncated (\(error.field))")
        } catch let error as PackageError {
            throw error
        } catch {
            throw PackageError(.invalidArchive, "not a zip archive")
        }
    }

    /// The offset of the last end-of-central-directory signature within the final 22 + 65535 bytes.
    static func endRecordOffset(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 22 else { return nil }
        var index = bytes.count - 22
        let lowest = max(0, bytes.count - 22 - 65535)
        while index >= lowest {
            if bytes[index] == 0x50, bytes[index + 1] == 0x4B, bytes[index + 2] == 0x05, bytes[index + 3] == 0x06 { return index }
            index -= 1
        }
        return nil
    }
}
