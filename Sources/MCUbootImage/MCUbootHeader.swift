import BLECore
import DFUPackage

/// An image version (`struct image_version`): major u8, minor u8, revision u16, build number u32.
public struct MCUbootVersion: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    public var major: UInt8
    public var minor: UInt8
    public var revision: UInt16
    public var build: UInt32

    public init(major: UInt8, minor: UInt8 = 0, revision: UInt16 = 0, build: UInt32 = 0) {
        self.major = major
        self.minor = minor
        self.revision = revision
        self.build = build
    }

    /// Parses "1.2.3" or "1.2.3+4" (imgtool's form) or "1.2.3.4" (the form SMP reports).
    public init?(_ text: String) {
        let main = text.split(separator: "+", maxSplits: 1, omittingEmptySubsequences: false)
        let parts = main[0].split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count), main.count == 1 || parts.count <= 3,
            let major = UInt8(parts[0]),
            let minor = parts.count > 1 ? UInt8(parts[1]) : 0,
            let revision = parts.count > 2 ? UInt16(parts[2]) : 0
        else { return nil }
        var build: UInt32 = 0
        if parts.count == 4 {
            guard let b = UInt32(parts[3]) else { return nil }
            build = b
        } else if main.count == 2 {
            guard let b = UInt32(main[1]) else { return nil }
            build = b
        }
        self.init(major: major, minor: minor, revision: revision, build: build)
    }

    /// Major, minor, revision, then build (MCUboot compares the build only with
    /// `MCUBOOT_VERSION_CMP_USE_BUILD_NUMBER`; see ``compare(_:_:useBuild:)``).
    public static func < (lhs: MCUbootVersion, rhs: MCUbootVersion) -> Bool {
        (lhs.major, lhs.minor, lhs.revision, lhs.build) < (rhs.major, rhs.minor, rhs.revision, rhs.build)
    }

    /// -1, 0, 1 as `boot_compare_version` / `img_mgmt_vercmp`.
    public static func compare(_ a: MCUbootVersion, _ b: MCUbootVersion, useBuild: Bool) -> Int {
        let l = (a.major, a.minor, a.revision, useBuild ? a.build : 0)
        let r = (b.major, b.minor, b.revision, useBuild ? b.build : 0)
        return l < r ? -1 : l == r ? 0 : 1
    }

    /// "1.2.3+4" (imgtool).
    public var description: String { "\(major).\(minor).\(revision)" + (build != 0 ? "+\(build)" : "") }

    /// "1.2.3" or "1.2.3.4" as Zephyr's image state list shows it (`img_mgmt_ver_str`: the build only when ≠ 0).
    public var smpString: String { "\(major).\(minor).\(revision)" + (build != 0 ? ".\(build)" : "") }
}

/// The 32-byte MCUboot image header (`bootutil/image.h struct image_header`, little-endian; smp-mcuboot.md §7.1).
///
///     0  ih_magic u32 (0x96f3b83d)     12 ih_img_size u32 (body after the header)
///     4  ih_load_addr u32              16 ih_flags u32
///     8  ih_hdr_size u16               20 ih_ver: major u8, minor u8, revision u16, build_num u32
///     10 ih_protect_tlv_size u16       28 pad u32
public struct MCUbootHeader: Hashable, Sendable {
    public static let magic: UInt32 = 0x96F3_B83D
    /// Version 1 images (no longer built).
    public static let magicV1: UInt32 = 0x96F3_B83C
    public static let size = 32

    public var loadAddress: UInt32
    public var headerSize: UInt16
    /// Size of the protected TLV area including its 4-byte info header (0 when there is none).
    public var protectedTLVSize: UInt16
    public var imageSize: UInt32
    public var flags: MCUbootFlags
    public var version: MCUbootVersion

    public init(
        loadAddress: UInt32 = 0, headerSize: UInt16 = 0x200, protectedTLVSize: UInt16 = 0, imageSize: UInt32,
        flags: MCUbootFlags = [], version: MCUbootVersion
    ) {
        self.loadAddress = loadAddress
        self.headerSize = headerSize
        self.protectedTLVSize = protectedTLVSize
        self.imageSize = imageSize
        self.flags = flags
        self.version = version
    }

    public init(decoding bytes: ArraySlice<UInt8>) throws(PackageError) {
        var reader = ByteReader(bytes)
        do {
            let magic = try reader.readUInt32("ih_magic")
            guard magic == Self.magic else {
                throw PackageError(
                    .invalidInput,
                    "not an MCUboot image: header magic 0x\(String(magic, radix: 16)) (expected 0x96f3b83d)")
            }
            loadAddress = try reader.readUInt32("ih_load_addr")
            headerSize = try reader.readUInt16("ih_hdr_size")
            protectedTLVSize = try reader.readUInt16("ih_protect_tlv_size")
            imageSize = try reader.readUInt32("ih_img_size")
            flags = MCUbootFlags(rawValue: try reader.readUInt32("ih_flags"))
            version = MCUbootVersion(
                major: try reader.readUInt8("iv_major"), minor: try reader.readUInt8("iv_minor"),
                revision: try reader.readUInt16("iv_revision"), build: try reader.readUInt32("iv_build_num"))
            _ = try reader.readUInt32("pad")
        } catch let error as ByteReader.Truncated {
            throw PackageError(.invalidInput, "MCUboot image truncated: \(error)")
        } catch let error as PackageError {
            throw error
        } catch {
            throw PackageError(.invalidInput, "\(error)")
        }
        guard headerSize >= Self.size else {
            throw PackageError(.invalidInput, "MCUboot header size \(headerSize) is below 32 bytes")
        }
    }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: Self.size)
        w.write(Self.magic)
        w.write(loadAddress)
        w.write(headerSize)
        w.write(protectedTLVSize)
        w.write(imageSize)
        w.write(flags.rawValue)
        w.write(version.major)
        w.write(version.minor)
        w.write(version.revision)
        w.write(version.build)
        w.write(UInt32(0))
        return w.bytes
    }
}

/// `ih_flags` (`image.h` IMAGE_F_*).
public struct MCUbootFlags: OptionSet, Hashable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let encryptedAES128 = MCUbootFlags(rawValue: 0x04)
    public static let encryptedAES256 = MCUbootFlags(rawValue: 0x08)
    public static let nonBootable = MCUbootFlags(rawValue: 0x10)
    public static let ramLoad = MCUbootFlags(rawValue: 0x20)
    public static let romFixed = MCUbootFlags(rawValue: 0x100)

    public var names: [String] {
        [(Self.encryptedAES128, "encrypted-aes128"), (.encryptedAES256, "encrypted-aes256"), (.nonBootable, "non-bootable"),
         (.ramLoad, "ram-load"), (.romFixed, "rom-fixed")].filter { contains($0.0) }.map(\.1)
    }
}
