import BLECore
import Foundation

/// The init packet of one part, Secure or Legacy.
public enum InitPacket: Hashable, Sendable {
    case secure(SecureInitPacket)
    case legacy(LegacyInitPacket)

    /// Decides the format from the bytes: a `dfu.Packet` with an INIT command is Secure; otherwise a known
    /// Legacy layout; otherwise the Secure decoding error is thrown.
    public init(decoding bytes: [UInt8]) throws(PackageError) {
        do {
            self = .secure(try SecureInitPacket(decoding: bytes))
        } catch let secureError {
            guard let legacy = try? LegacyInitPacket(decoding: bytes) else { throw secureError }
            self = .legacy(legacy)
        }
    }
}

/// Secure DFU (nRF5 SDK ≥ 12, protobuf init packets) or Legacy DFU (SDK ≤ 11).
public enum PackageFormat: String, Hashable, Sendable {
    case secure
    case legacy
}

/// One image of a package with everything needed to send it.
public struct PackagePart: Hashable, Sendable {
    public var kind: PartKind
    public var binFile: String
    public var datFile: String
    /// The firmware image (`.bin`) bytes.
    public var image: [UInt8]
    /// The init packet (`.dat`) bytes, exactly as in the archive: what is sent to the device.
    public var initPacketBytes: [UInt8]
    /// The decoded init packet.
    public var initPacket: InitPacket
    /// SD+BL sizes from the manifest (informational).
    public var manifestSDSize: UInt32?
    public var manifestBLSize: UInt32?

    /// The Secure init packet, nil for Legacy.
    public var secureInit: SecureInitPacket? { if case .secure(let p) = initPacket { p } else { nil } }
    /// The Legacy init packet, nil for Secure.
    public var legacyInit: LegacyInitPacket? { if case .legacy(let p) = initPacket { p } else { nil } }
    /// The decoded init command (Secure only).
    public var initCommand: InitCommand? { secureInit?.command }

    /// The image type: the init command's type when present, else the one the manifest key implies.
    public var firmwareType: FirmwareType { initCommand?.type ?? kind.firmwareType }

    /// SoftDevice, bootloader and application sizes (Legacy Start packet): from the init command, else the
    /// manifest (SD+BL), else the image length.
    public var sizes: (softdevice: UInt32, bootloader: UInt32, application: UInt32) {
        let length = UInt32(clamping: image.count)
        switch kind {
        case .softdeviceBootloader:
            return (initCommand?.sdSize ?? manifestSDSize ?? 0, initCommand?.blSize ?? manifestBLSize ?? 0, 0)
        case .softdevice: return (length, 0, 0)
        case .bootloader: return (0, length, 0)
        case .application: return (0, 0, length)
        }
    }
}

/// A Nordic DFU package (`.zip`): manifest, images and init packets, read into memory and checked for structure.
///
/// Reading never writes to disk. Hash/size/signature checks are done by ``verify(keys:)``.
public struct FirmwarePackage: Hashable, Sendable {
    public var manifest: Manifest
    /// Parts in send order: softdevice_bootloader, softdevice, bootloader, application.
    public var parts: [PackagePart]
    public var format: PackageFormat
    /// Zip entries in archive order.
    public var entries: [ArchiveEntryInfo]
    /// Non-fatal findings (unknown manifest keys, unreferenced entries). The library never prints them.
    public var warnings: [String]

    /// Reads a package from its bytes.
    public init(data: Data, limits: ArchiveLimits = ArchiveLimits()) throws(PackageError) {
        let contents = try ArchiveReader.read(data, limits: limits)
        guard let manifestBytes = Self.lookup("manifest.json", in: contents) else {
            throw PackageError(.invalidManifest, "archive has no manifest.json")
        }
        let manifest = try Manifest(json: manifestBytes)
        var warnings = manifest.warnings
        var parts: [PackagePart] = []
        var used: Set<String> = ["manifest.json"]
        for entry in manifest.parts {
            guard let image = Self.lookup(entry.binFile, in: contents) else {
                throw PackageError(.missingFile, "\(entry.kind): manifest names \(entry.binFile), which is not in the archive")
            }
            guard let dat = Self.lookup(entry.datFile, in: contents) else {
                throw PackageError(.missingFile, "\(entry.kind): manifest names \(entry.datFile), which is not in the archive")
            }
            used.insert(entry.binFile)
            used.insert(entry.datFile)
            let initPacket: InitPacket
            do {
                initPacket = try InitPacket(decoding: dat)
            } catch {
                throw PackageError(.invalidInitPacket, "\(entry.kind): \(entry.datFile) does not decode: \(error.message)")
            }
            parts.append(
                PackagePart(
                    kind: entry.kind, binFile: entry.binFile, datFile: entry.datFile, image: image, initPacketBytes: dat,
                    initPacket: initPacket, manifestSDSize: entry.sdSize, manifestBLSize: entry.blSize))
        }
        let secureCount = parts.count { $0.secureInit != nil }
        guard secureCount == 0 || secureCount == parts.count else {
            throw PackageError(.invalidInitPacket, "package mixes Secure and Legacy init packets")
        }
        for entry in contents.entries where !used.contains(entry.name) && !used.contains(Self.basename(entry.name)) {
            warnings.append("archive: entry '\(entry.name)' is not named in the manifest")
        }
        self.manifest = manifest
        self.parts = parts
        self.format = secureCount > 0 ? .secure : .legacy
        self.entries = contents.entries
        self.warnings = warnings
    }

    /// Reads a package from its bytes.
    public init(bytes: [UInt8], limits: ArchiveLimits = ArchiveLimits()) throws(PackageError) {
        try self.init(data: Data(bytes), limits: limits)
    }

    /// Reads a package file (into memory, bounded by `limits.maxArchiveSize`).
    public init(contentsOf url: URL, limits: ArchiveLimits = ArchiveLimits()) throws(PackageError) {
        let data: Data
        do {
            let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue ?? 0
            guard size <= limits.maxArchiveSize else {
                throw PackageError(.entryTooLarge, "\(url.lastPathComponent) is \(size) bytes, more than the \(limits.maxArchiveSize)-byte limit")
            }
            data = try Data(contentsOf: url)
        } catch let error as PackageError {
            throw error
        } catch {
            throw PackageError(.io, FileProblem.describe("read", url.path, error))
        }
        try self.init(data: data, limits: limits)
    }

    /// Finds a file by exact entry name, else by a unique entry whose last path component matches (iOS
    /// `ZipArchive.findFile` semantics).
    static func lookup(_ name: String, in contents: ArchiveReader.Contents) -> [UInt8]? {
        if let bytes = contents.files[name] { return bytes }
        let matches = contents.entries.filter { basename($0.name) == name }
        guard matches.count == 1, let only = matches.first else { return nil }
        return contents.files[only.name]
    }

    static func basename(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    /// The part of a kind, if present.
    public func part(_ kind: PartKind) -> PackagePart? { parts.first { $0.kind == kind } }
}
