import BLECore
import Crypto
import MCUbootImage
import MCUmgr

/// The image trailer at the end of a slot (`bootutil_misc.h`; smp-mcuboot.md §7.3), as flags.
public struct MCUbootTrailer: Codable, Sendable, Hashable {
    /// The 16-byte boot magic is written.
    public var magic = false
    public var imageOK = false
    public var copyDone = false
    public init(magic: Bool = false, imageOK: Bool = false, copyDone: Bool = false) {
        self.magic = magic
        self.imageOK = imageOK
        self.copyDone = copyDone
    }
}

/// One slot: the image bytes written to it (nil when erased) and its trailer.
public struct MCUbootSlot: Codable, Sendable, Hashable {
    public var bytes: [UInt8]?
    public var trailer = MCUbootTrailer()

    public init(bytes: [UInt8]? = nil, trailer: MCUbootTrailer = MCUbootTrailer()) {
        self.bytes = bytes
        self.trailer = trailer
    }

    /// The image in the slot, when it has a valid header and TLVs (`img_mgmt_read_info`).
    var image: MCUbootImage? { bytes.flatMap { try? MCUbootImage(bytes: $0) } }
}

/// MCUboot's next-boot decision (`bootutil_public.h` BOOT_SWAP_TYPE_*).
public enum MCUbootSwapType: String, Codable, Sendable, Hashable {
    case none, test, permanent = "perm", revert
}

/// Primary and secondary slot of one image, and the bootloader's rules on them (`bootutil_public.c`,
/// `loader.c`; smp-mcuboot.md §6).
public struct MCUbootImagePair: Codable, Sendable, Hashable {
    public var primary: MCUbootSlot
    public var secondary: MCUbootSlot

    public init(primary: MCUbootSlot, secondary: MCUbootSlot = MCUbootSlot()) {
        self.primary = primary
        self.secondary = secondary
    }

    /// The swap table (`boot_swap_type_multi`): secondary magic with image_ok unset → TEST, set → PERM; primary
    /// magic, image_ok unset and copy_done set → REVERT; otherwise NONE.
    public var swapType: MCUbootSwapType {
        if secondary.trailer.magic { return secondary.trailer.imageOK ? .permanent : .test }
        if primary.trailer.magic, !primary.trailer.imageOK, primary.trailer.copyDone { return .revert }
        return .none
    }

    /// The image state list entries (`img_mgmt_state_flags`): slot 0 is always active; NONE → slot 0 confirmed;
    /// TEST → slot 0 confirmed, slot 1 pending; PERM → slot 0 confirmed, slot 1 pending + permanent; REVERT →
    /// slot 1 confirmed. A slot without a valid image is not listed.
    func stateEntries(image number: Int) -> [SMPImageSlot] {
        let swap = swapType
        var out: [SMPImageSlot] = []
        for (slot, content) in [(0, primary), (1, secondary)] {
            guard let image = content.image, let hash = image.hashTLV else { continue }
            var entry = SMPImageSlot(
                image: number, slot: slot, version: image.header.version.smpString, hash: hash,
                bootable: !image.header.flags.contains(.nonBootable))
            switch (swap, slot) {
            case (.none, 0), (.test, 0), (.permanent, 0): entry.confirmed = true
            case (.test, 1): entry.pending = true
            case (.permanent, 1):
                entry.pending = true
                entry.permanent = true
            case (.revert, 1): entry.confirmed = true
            default: break
            }
            entry.active = slot == 0
            out.append(entry)
        }
        return out
    }

    /// What one boot does to this pair, and how long it takes.
    public enum BootOutcome: Hashable, Sendable {
        case nothing
        case swapped(MCUbootSwapType)
        /// The secondary image failed validation (hash, signature, downgrade) and was erased.
        case refused(String)
    }

    /// One boot (`loader.c context_boot_go`): validate the secondary before TEST/PERM (an invalid or downgraded
    /// image is erased and nothing is swapped), swap (the old image moves to the secondary slot), mark the new
    /// primary (copy_done, image_ok for PERM); REVERT swaps back and confirms the old image.
    mutating func boot(options: MCUbootOptions) -> (BootOutcome, swappedBytes: Int) {
        switch swapType {
        case .none: return (.nothing, 0)
        case .revert:
            let bytes = max(primary.bytes?.count ?? 0, secondary.bytes?.count ?? 0)
            let old = secondary.bytes
            secondary = MCUbootSlot(bytes: primary.bytes)
            primary = MCUbootSlot(bytes: old, trailer: MCUbootTrailer(magic: true, imageOK: true, copyDone: true))
            return (.swapped(.revert), bytes)
        case .test, .permanent:
            let type = swapType
            if let why = validateSecondary(options: options) {
                secondary = MCUbootSlot()
                return (.refused(why), 0)
            }
            let bytes = max(primary.bytes?.count ?? 0, secondary.bytes?.count ?? 0)
            let old = primary.bytes
            primary = MCUbootSlot(
                bytes: secondary.bytes, trailer: MCUbootTrailer(magic: true, imageOK: type == .permanent, copyDone: true))
            secondary = MCUbootSlot(bytes: old)
            return (.swapped(type), bytes)
        }
    }

    /// `boot_validate_slot` + `check_downgrade_prevention`.
    func validateSecondary(options: MCUbootOptions) -> String? {
        guard let bytes = secondary.bytes else { return "no image in the secondary slot" }
        let image: MCUbootImage
        do {
            image = try MCUbootImage(bytes: bytes)
            try image.checkHash()
        } catch {
            return "\(error)"
        }
        if !options.publicKeys.isEmpty {
            let verified = options.publicKeys.contains { pem in
                guard let key = try? MCUbootPublicKey(pem: pem) else { return false }
                return (try? image.verify(key: key)) != nil
            }
            if !verified { return "signature does not verify with the bootloader's keys" }
        }
        if options.downgradePrevention, let running = primary.image,
            MCUbootVersion.compare(image.header.version, running.header.version, useBuild: options.compareBuildNumber) < 0
        {
            return "downgrade from \(running.header.version) to \(image.header.version) prevented"
        }
        return nil
    }

    /// The running application confirms itself (`boot_write_img_confirmed`): image_ok in the primary trailer.
    mutating func confirmPrimary() {
        if primary.trailer.magic, !primary.trailer.imageOK { primary.trailer.imageOK = true }
    }
}

extension MCUbootImagePair {
    /// A device's factory state: a synthetic application image of `installed.size` bytes, confirmed, hash-only
    /// signed (deterministic bytes: SHA-256 in counter mode over the profile's name and the image number).
    static func factory(_ installed: SMPInstalledImage, seed: String) -> MCUbootImagePair {
        var body: [UInt8] = []
        var counter = 0
        while body.count < installed.size {
            body += SHA256.hash(data: Array("bledfu-smp:\(seed):\(counter)".utf8))
            counter += 1
        }
        let version = MCUbootVersion(installed.version) ?? MCUbootVersion(major: 1)
        let image = try? MCUbootImage.sign(firmware: Array(body.prefix(max(installed.size, 1))), version: version, key: nil)
        return MCUbootImagePair(primary: MCUbootSlot(bytes: image?.bytes))
    }
}
