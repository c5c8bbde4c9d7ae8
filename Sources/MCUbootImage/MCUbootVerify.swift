import BLECore
import Crypto
import DFUPackage

/// What checking an image found.
public struct MCUbootVerification: Hashable, Sendable {
    /// The SHA-256 TLV matches the image.
    public var hash: [UInt8]
    /// The key type whose signature verified, when a key was given.
    public var signedBy: String?
}

extension MCUbootImage {
    /// The smallest trailer MCUboot needs at the end of a slot: magic (16) + image_ok, copy_done, swap_info,
    /// swap_size at `BOOT_MAX_ALIGN` 8 (4 × 8) (`bootutil_misc.h`, smp-mcuboot.md §7.3).
    public static let minimumTrailerSize = 48

    /// Checks the image as MCUboot's `boot_validate_slot` would: the hash always; with `key`, the key hash (when
    /// present) and a signature of the key's type; with `slotSize`, that the image and the trailer fit the slot.
    /// Every refusal is one line naming the cause.
    public func verify(key: MCUbootPublicKey?, slotSize: Int? = nil) throws(PackageError) -> MCUbootVerification {
        try checkHash()
        if let slotSize, bytes.count + Self.minimumTrailerSize > slotSize {
            throw PackageError(
                .invalidInput,
                "MCUboot image of \(bytes.count) bytes does not fit a slot of \(slotSize) bytes with its trailer")
        }
        let hash = computedHash
        guard let key else { return MCUbootVerification(hash: hash, signedBy: nil) }
        if let keyHash, keyHash != key.keyHash {
            throw PackageError(.signatureInvalid, "MCUboot image was signed with another key (key hash \(keyHash.hexString.prefix(16))…)")
        }
        let candidates = tlvs.filter { $0.type == key.signatureTLV }
        guard !candidates.isEmpty else {
            let present = signatureTLVs.map(\.name).joined(separator: ", ")
            throw PackageError(
                .signatureInvalid,
                "MCUboot image has no \(key.name) signature" + (present.isEmpty ? " (unsigned)" : " (it has \(present))"))
        }
        guard candidates.contains(where: { key.isValid(signature: $0.value, region: hashedRegion) }) else {
            throw PackageError(.signatureInvalid, "MCUboot image \(key.name) signature does not verify with the given key")
        }
        return MCUbootVerification(hash: hash, signedBy: key.name)
    }

    /// Signs `firmware` (the application without a header) as `imgtool sign --pad-header` does: a header of
    /// `headerSize` bytes padded with the erased value 0xFF (imgtool's `--erased-val` default), then the firmware, protected TLVs (SEC_CNT when a security counter is given), and the
    /// TLV area: SHA256, then KEYHASH and the signature when a key is given.
    public static func sign(
        firmware: [UInt8], version: MCUbootVersion, key: MCUbootPrivateKey?, headerSize: Int = 0x200,
        loadAddress: UInt32 = 0, securityCounter: UInt32? = nil, slotSize: Int? = nil
    ) throws(PackageError) -> MCUbootImage {
        guard headerSize >= MCUbootHeader.size, headerSize <= Int(UInt16.max) else {
            throw PackageError(.invalidInput, "header size \(headerSize) is not in 32...65535")
        }
        guard !firmware.isEmpty, firmware.count <= Int(UInt32.max) else {
            throw PackageError(.invalidInput, "firmware of \(firmware.count) bytes")
        }
        if firmware.count >= 4, firmware.prefix(4).elementsEqual([0x3D, 0xB8, 0xF3, 0x96]) {
            throw PackageError(.invalidInput, "the input is already an MCUboot image (header magic 0x96f3b83d)")
        }
        var protected: [UInt8] = []
        if let securityCounter {
            protected = Self.tlvArea(
                magic: MCUbootTLV.protectedInfoMagic,
                [MCUbootTLV(type: MCUbootTLV.securityCounter, value: withUnsafeBytes(of: securityCounter.littleEndian) { Array($0) })])
        }
        let header = MCUbootHeader(
            loadAddress: loadAddress, headerSize: UInt16(headerSize), protectedTLVSize: UInt16(protected.count),
            imageSize: UInt32(firmware.count), version: version)
        var payload = header.encoded + [UInt8](repeating: 0xFF, count: headerSize - MCUbootHeader.size) + firmware + protected
        var tlvs = [MCUbootTLV(type: MCUbootTLV.sha256, value: Array(SHA256.hash(data: payload)))]
        if let key {
            tlvs.append(MCUbootTLV(type: MCUbootTLV.keyHash, value: key.publicKey.keyHash))
            tlvs.append(MCUbootTLV(type: key.publicKey.signatureTLV, value: try key.sign(region: payload)))
        }
        payload += Self.tlvArea(magic: MCUbootTLV.infoMagic, tlvs)
        let image = try MCUbootImage(bytes: payload)
        if let slotSize, image.bytes.count + minimumTrailerSize > slotSize {
            throw PackageError(.invalidInput, "signed image of \(image.bytes.count) bytes does not fit a slot of \(slotSize) bytes")
        }
        return image
    }

    /// Info header (magic, total length including itself) and the TLVs.
    static func tlvArea(magic: UInt16, _ tlvs: [MCUbootTLV]) -> [UInt8] {
        var body: [UInt8] = []
        for tlv in tlvs {
            body += [UInt8(tlv.type & 0xFF), UInt8(tlv.type >> 8), UInt8(tlv.value.count & 0xFF), UInt8(tlv.value.count >> 8)]
            body += tlv.value
        }
        let total = body.count + 4
        return [UInt8(magic & 0xFF), UInt8(magic >> 8), UInt8(total & 0xFF), UInt8(total >> 8)] + body
    }
}

/// Intel HEX for MCUboot images: imgtool writes a signed `.hex` at the slot's address; the image is the bytes from
/// the lowest data address, gaps filled with 0xFF.
public enum MCUbootHex {
    /// The bytes and the address of the first one.
    public static func read(_ text: String) throws(PackageError) -> (address: UInt32, bytes: [UInt8]) {
        let runs = try IntelHex.parse(text)
        guard let low = runs.map(\.address).min(),
            let high = runs.map({ UInt64($0.address) + UInt64($0.bytes.count) }).max(), high > UInt64(low)
        else { throw PackageError(.invalidInput, "hex file holds no data") }
        guard high - UInt64(low) <= UInt64(IntelHex.maxSpan) else {
            throw PackageError(.invalidInput, "hex data spans more than \(IntelHex.maxSpan) bytes")
        }
        var out = [UInt8](repeating: 0xFF, count: Int(high - UInt64(low)))
        for run in runs {
            let start = Int(run.address - low)
            out.replaceSubrange(start..<(start + run.bytes.count), with: run.bytes)
        }
        return (low, out)
    }

    /// Intel HEX text: extended linear address records, 16 data bytes per record, end-of-file record.
    public static func write(_ bytes: [UInt8], address: UInt32) -> String {
        var lines: [String] = []
        func record(_ type: UInt8, _ offset: UInt16, _ data: [UInt8]) {
            let fields = [UInt8(data.count), UInt8(offset >> 8), UInt8(offset & 0xFF), type] + data
            let checksum = UInt8(truncatingIfNeeded: 0x100 - Int(fields.reduce(UInt8(0), &+)))
            lines.append(":" + (fields + [checksum]).hexString.uppercased())
        }
        var upper: UInt32?
        var index = 0
        while index < bytes.count {
            let at = address &+ UInt32(index)
            if upper != at >> 16 {
                upper = at >> 16
                record(0x04, 0, [UInt8((at >> 24) & 0xFF), UInt8((at >> 16) & 0xFF)])
            }
            let count = min(16, bytes.count - index, Int(0x10000 - (at & 0xFFFF)))
            record(0x00, UInt16(at & 0xFFFF), Array(bytes[index..<(index + count)]))
            index += count
        }
        record(0x01, 0, [])
        return lines.joined(separator: "\n") + "\n"
    }
}
