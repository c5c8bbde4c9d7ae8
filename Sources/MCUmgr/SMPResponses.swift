import CBOR

/// `mcumgr_params` (os 6): the SMP transport's buffers (`MCUMGR_TRANSPORT_NETBUF_SIZE` / `_COUNT`).
public struct SMPParameters: Hashable, Sendable, Codable {
    public var bufferSize: Int
    public var bufferCount: Int
    public init(bufferSize: Int, bufferCount: Int) {
        self.bufferSize = bufferSize
        self.bufferCount = bufferCount
    }

    public init(body: CBOR) throws(SMPError) {
        guard let size = body["buf_size"]?.intValue, let count = body["buf_count"]?.intValue, size > 0, count > 0 else {
            throw SMPError(.protocolViolation, "mcumgr_params response without positive buf_size and buf_count: \(body)")
        }
        self.init(bufferSize: size, bufferCount: count)
    }
}

/// One slot of the image state list (smp-mcuboot.md §3.1).
public struct SMPImageSlot: Hashable, Sendable, Codable, CustomStringConvertible {
    public var image: Int
    public var slot: Int
    public var version: String
    /// The image's SHA-256 TLV value (32 bytes), not a hash of the file.
    public var hash: [UInt8]
    public var bootable: Bool
    public var pending: Bool
    public var confirmed: Bool
    public var active: Bool
    public var permanent: Bool

    public init(
        image: Int = 0, slot: Int, version: String, hash: [UInt8], bootable: Bool = true, pending: Bool = false,
        confirmed: Bool = false, active: Bool = false, permanent: Bool = false
    ) {
        self.image = image
        self.slot = slot
        self.version = version
        self.hash = hash
        self.bootable = bootable
        self.pending = pending
        self.confirmed = confirmed
        self.active = active
        self.permanent = permanent
    }

    /// Missing flags are false (`MCUMGR_GRP_IMG_FRUGAL_LIST` omits them), a missing `image` is 0.
    public init(entry: CBOR) throws(SMPError) {
        guard let slot = entry["slot"]?.intValue, let version = entry["version"]?.textValue else {
            throw SMPError(.protocolViolation, "image state entry without slot or version: \(entry)")
        }
        let hash = entry["hash"]?.bytesValue ?? []
        self.init(
            image: entry["image"]?.intValue ?? 0, slot: slot, version: version, hash: hash,
            bootable: entry["bootable"]?.boolValue ?? false, pending: entry["pending"]?.boolValue ?? false,
            confirmed: entry["confirmed"]?.boolValue ?? false, active: entry["active"]?.boolValue ?? false,
            permanent: entry["permanent"]?.boolValue ?? false)
    }

    /// The entry as Zephyr's `img_mgmt_state_read` writes it (`image` only when several images are configured).
    public func body(includeImage: Bool, frugal: Bool = false) -> CBOR {
        var pairs: [CBOR.Pair] = []
        if includeImage { pairs.append(CBOR.Pair(.text("image"), .int(image))) }
        pairs.append(CBOR.Pair(.text("slot"), .int(slot)))
        pairs.append(CBOR.Pair(.text("version"), .text(version)))
        pairs.append(CBOR.Pair(.text("hash"), .bytes(hash)))
        for (name, flag) in [
            ("bootable", bootable), ("pending", pending), ("confirmed", confirmed), ("active", active),
            ("permanent", permanent),
        ] where !frugal || flag {
            pairs.append(CBOR.Pair(.text(name), .bool(flag)))
        }
        return .map(pairs)
    }

    public var hashHex: String { hash.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined() }

    public var description: String {
        let flags = [
            bootable ? "bootable" : nil, pending ? "pending" : nil, confirmed ? "confirmed" : nil,
            active ? "active" : nil, permanent ? "permanent" : nil,
        ].compactMap { $0 }
        return "image \(image) slot \(slot) version \(version) hash \(hashHex) [\(flags.joined(separator: " "))]"
    }
}

/// The image state list (`{"images": [...], "splitStatus"?: n}`).
public struct SMPImageState: Hashable, Sendable, Codable {
    public var images: [SMPImageSlot]
    public var splitStatus: Int?

    public init(images: [SMPImageSlot], splitStatus: Int? = nil) {
        self.images = images
        self.splitStatus = splitStatus
    }

    public init(body: CBOR) throws(SMPError) {
        guard let entries = body["images"]?.arrayValue else {
            throw SMPError(.protocolViolation, "image state response without an images array: \(body)")
        }
        var images: [SMPImageSlot] = []
        for entry in entries { images.append(try SMPImageSlot(entry: entry)) }
        self.init(images: images, splitStatus: body["splitStatus"]?.intValue)
    }

    /// The slot holding `hash` (for `image`), if any.
    public func slot(withHash hash: [UInt8], image: Int = 0) -> SMPImageSlot? {
        images.first { $0.hash == hash && $0.image == image }
    }

    /// The running slot of `image`.
    public func active(image: Int = 0) -> SMPImageSlot? { images.first { $0.active && $0.image == image } }
}

/// The answer to one upload chunk: the offset the device expects next and, on the last chunk with
/// `CONFIG_IMG_ENABLE_IMAGE_CHECK`, whether the written image matches `sha`.
public struct SMPUploadResponse: Hashable, Sendable {
    public var offset: Int
    public var match: Bool?

    public init(offset: Int, match: Bool? = nil) {
        self.offset = offset
        self.match = match
    }

    public init(body: CBOR) throws(SMPError) {
        guard let offset = body["off"]?.intValue, offset >= 0 else {
            throw SMPError(.protocolViolation, "upload response without a valid off: \(body)")
        }
        self.init(offset: offset, match: body["match"]?.boolValue)
    }
}

/// The answer to OS echo (id 0): `{"r": text}`.
public struct SMPEchoResponse: Hashable, Sendable {
    public var text: String

    public init(body: CBOR) throws(SMPError) {
        guard let text = body["r"]?.textValue else {
            throw SMPError(.protocolViolation, "echo answer without the text (\"r\"): \(body)")
        }
        self.text = text
    }
}

/// Bootloader information (OS id 8, `CONFIG_MCUMGR_GRP_OS_BOOTLOADER_INFO`): `{"bootloader": "MCUboot"}` for an empty
/// query, `{"mode": n}` for the query "mode" (MCUboot's mode: 0 single slot, 1 swap using scratch, 2 overwrite only,
/// 3 swap without scratch, 4 DirectXIP, 5 DirectXIP with revert, 6 RAM loader).
public struct SMPBootloaderInfo: Hashable, Sendable {
    public var name: String?
    public var mode: Int?

    public init(name: String?, mode: Int?) {
        self.name = name
        self.mode = mode
    }

    public init(body: CBOR) {
        name = body["bootloader"]?.textValue
        mode = body["mode"]?.intValue
    }
}
