import BLECore
import Foundation
import ZIPFoundation

/// Bounds applied while reading a package archive (hostile input: zip bombs, huge entries).
public struct ArchiveLimits: Hashable, Sendable {
    /// Largest uncompressed entry accepted (default 16 MiB; the largest real SD+BL image is ~180 KB).
    public var maxEntrySize: Int
    /// Largest sum of uncompressed entries (default 64 MiB).
    public var maxTotalSize: Int
    /// Largest archive accepted (default 64 MiB).
    public var maxArchiveSize: Int
    /// Largest uncompressed/compressed ratio for entries over 1 MiB (default 100).
    public var maxCompressionRatio: Int
    /// Most entries accepted (default 64).
    public var maxEntries: Int

    public init(
        maxEntrySize: Int = 16 << 20, maxTotalSize: Int = 64 << 20, maxArchiveSize: Int = 64 << 20,
        maxCompressionRatio: Int = 100, maxEntries: Int = 64
    ) {
        self.maxEntrySize = maxEntrySize
        self.maxTotalSize = maxTotalSize
        self.maxArchiveSize = maxArchiveSize
        self.maxCompressionRatio = maxCompressionRatio
        self.maxEntries = maxEntries
    }
}

/// One zip entry as listed in the central directory.
public struct ArchiveEntryInfo: Hashable, Sendable {
    public var name: String
    public var size: UInt64
    public var compressedSize: UInt64
    /// True when deflated (method 8), false when stored (method 0).
    public var isCompressed: Bool
    /// The CRC-32 from the central directory (checked against the extracted bytes).
    public var crc32: UInt32
}

/// Reads every file entry of a zip archive into memory, checking names, sizes and CRC-32s. Nothing touches disk.
enum ArchiveReader {
    struct Contents {
        var entries: [ArchiveEntryInfo]
        var files: [String: [UInt8]]
    }

    static func read(_ data: Data, limits: ArchiveLimits) throws(PackageError) -> Contents {
        guard data.count <= limits.maxArchiveSize else {
            throw PackageError(.entryTooLarge, "archive is \(data.count) bytes, more than the \(limits.maxArchiveSize)-byte limit")
        }
        guard data.count >= 22 else {
            throw PackageError(.invalidArchive, "not a zip archive (\(data.count) bytes, no end of central directory)")
        }
        // ZIPFoundation leaks its in-memory file when `Archive(data:)` throws, so non-zips are rejected here first.
        // It also traps on offsets past the end, so the records it will read are bounds-checked first.
        try ArchiveBounds.check(data)
        let archive: Archive
        do {
            archive = try Archive(data: data, accessMode: .read)
        } catch {
            throw PackageError(.invalidArchive, "not a readable zip archive (\(error))")
        }
        var contents = Contents(entries: [], files: [:])
        var total = 0
        var lowerNames = Set<String>()
        for entry in archive {
            let name = entry.path
            if entry.type == .directory { continue }
            guard contents.entries.count < limits.maxEntries else {
                throw PackageError(.invalidArchive, "archive has more than \(limits.maxEntries) entries")
            }
            try checkName(name)
            guard entry.type == .file else { throw PackageError(.unsafeEntry, "entry '\(name)' is a symbolic link") }
            guard lowerNames.insert(name.lowercased()).inserted else {
                throw PackageError(.unsafeEntry, "entry '\(name)' appears more than once")
            }
            let size = entry.uncompressedSize
            let packed = entry.compressedSize
            guard size <= UInt64(limits.maxEntrySize) else {
                throw PackageError(.entryTooLarge, "entry '\(name)' is \(size) bytes, more than the \(limits.maxEntrySize)-byte limit")
            }
            if size > 1 << 20, size / max(packed, 1) > UInt64(limits.maxCompressionRatio) {
                throw PackageError(.entryTooLarge, "entry '\(name)' has a compression ratio above \(limits.maxCompressionRatio):1 (zip bomb?)")
            }
            total += Int(size)
            guard total <= limits.maxTotalSize else {
                throw PackageError(.entryTooLarge, "entries total more than the \(limits.maxTotalSize)-byte limit")
            }
            contents.entries.append(
                ArchiveEntryInfo(name: name, size: size, compressedSize: packed, isCompressed: entry.isCompressed, crc32: entry.checksum))
            contents.files[name] = try extract(entry, from: archive, declared: Int(size))
        }
        return contents
    }

    private static func extract(_ entry: Entry, from archive: Archive, declared: Int) throws(PackageError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(declared)
        do {
            _ = try archive.extract(entry, skipCRC32: false) { chunk in
                guard bytes.count + chunk.count <= declared else {
                    throw PackageError(.corruptEntry, "entry '\(entry.path)' inflates past its declared \(declared) bytes")
                }
                bytes.append(contentsOf: chunk)
            }
        } catch let error as PackageError {
            throw error
        } catch Archive.ArchiveError.invalidCRC32 {
            throw PackageError(.corruptEntry, "entry '\(entry.path)' fails its CRC-32 check")
        } catch {
            throw PackageError(.corruptEntry, "entry '\(entry.path)' cannot be extracted (\(error))")
        }
        guard CRC32.checksum(bytes) == entry.checksum else {
            throw PackageError(.corruptEntry, "entry '\(entry.path)' fails its CRC-32 check")
        }
        guard bytes.count == declared else {
            throw PackageError(.corruptEntry, "entry '\(entry.path)' has \(bytes.count) bytes, its header says \(declared)")
        }
        return bytes
    }

    /// Rejects absolute paths, `..` components, backslashes, NULs and empty names.
    static func checkName(_ name: String) throws(PackageError) {
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.isEmpty, !name.hasPrefix("/"), !name.contains("\\"), !name.contains("\0"),
            !parts.contains(".."), !(parts.first?.contains(":") ?? false)
        else {
            throw PackageError(.unsafeEntry, "entry name '\(name)' is unsafe (absolute or '..' path)")
        }
    }
}
