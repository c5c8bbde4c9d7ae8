import BLECore
import Crypto
import DFUPackage

/// One TLV (`image.h`): type u16, length u16, value (little-endian).
public struct MCUbootTLV: Hashable, Sendable {
    public var type: UInt16
    public var value: [UInt8]
    public init(type: UInt16, value: [UInt8]) {
        self.type = type
        self.value = value
    }

    public static let keyHash: UInt16 = 0x01
    public static let publicKey: UInt16 = 0x02
    public static let sha256: UInt16 = 0x10
    public static let sha384: UInt16 = 0x11
    public static let sha512: UInt16 = 0x12
    public static let rsa2048PSS: UInt16 = 0x20
    public static let ecdsaSignature: UInt16 = 0x22
    public static let rsa3072PSS: UInt16 = 0x23
    public static let ed25519: UInt16 = 0x24
    public static let signaturePure: UInt16 = 0x25
    public static let dependency: UInt16 = 0x40
    public static let securityCounter: UInt16 = 0x50
    public static let bootRecord: UInt16 = 0x60

    /// Info header magics: the protected area (0x6908) and the unprotected one (0x6907).
    public static let protectedInfoMagic: UInt16 = 0x6908
    public static let infoMagic: UInt16 = 0x6907

    public var name: String {
        switch type {
        case Self.keyHash: "KEYHASH"
        case Self.publicKey: "PUBKEY"
        case Self.sha256: "SHA256"
        case Self.sha384: "SHA384"
        case Self.sha512: "SHA512"
        case Self.rsa2048PSS: "RSA2048_PSS"
        case 0x21: "ECDSA224"
        case Self.ecdsaSignature: "ECDSA_SIG"
        case Self.rsa3072PSS: "RSA3072_PSS"
        case Self.ed25519: "ED25519"
        case Self.signaturePure: "SIG_PURE"
        case 0x30: "ENC_RSA2048"
        case 0x31: "ENC_KW"
        case 0x32: "ENC_EC256"
        case 0x33: "ENC_X25519"
        case Self.dependency: "DEPENDENCY"
        case Self.securityCounter: "SEC_CNT"
        case Self.bootRecord: "BOOT_RECORD"
        default: "0x" + String(type, radix: 16)
        }
    }
}

/// An MCUboot image (`.bin`; a `.hex` is read into one): header, body, protected and unprotected TLV areas
/// (smp-mcuboot.md §7). The SHA-256 TLV covers header + body + protected TLV area; signatures cover that hash
/// (`image_validate.c`); the SMP `hash` of the image is the SHA-256 TLV value.
public struct MCUbootImage: Hashable, Sendable {
    /// The whole image, up to the end of the TLV areas (trailing padding, as in a padded `.bin`, is dropped).
    public let bytes: [UInt8]
    public let header: MCUbootHeader
    public let protectedTLVs: [MCUbootTLV]
    public let tlvs: [MCUbootTLV]

    /// Parses an image; every structural fault is a `PackageError` naming it.
    public init(bytes input: [UInt8]) throws(PackageError) {
        let header = try MCUbootHeader(decoding: input[...])
        let bodyEnd = Int(header.headerSize) + Int(header.imageSize)
        guard input.count >= bodyEnd + 4 else {
            throw PackageError(
                .invalidInput,
                "MCUboot image truncated: \(input.count) bytes, the header announces \(bodyEnd) plus the TLV area")
        }
        var offset = bodyEnd
        var protected: [MCUbootTLV] = []
        if header.protectedTLVSize > 0 {
            protected = try Self.area(input, at: offset, magic: MCUbootTLV.protectedInfoMagic, what: "protected TLV area")
            let total = Int(UInt16(input[offset + 2]) | UInt16(input[offset + 3]) << 8)
            guard total == Int(header.protectedTLVSize) else {
                throw PackageError(
                    .invalidInput,
                    "protected TLV area of \(total) bytes, the header says \(header.protectedTLVSize)")
            }
            offset += total
        }
        let tlvs = try Self.area(input, at: offset, magic: MCUbootTLV.infoMagic, what: "TLV area")
        let total = Int(UInt16(input[offset + 2]) | UInt16(input[offset + 3]) << 8)
        self.bytes = Array(input[..<(offset + total)])
        self.header = header
        self.protectedTLVs = protected
        self.tlvs = tlvs
    }

    /// Reads one TLV area (info header: magic u16, total u16 including the header; then the TLVs).
    static func area(_ input: [UInt8], at start: Int, magic: UInt16, what: String) throws(PackageError) -> [MCUbootTLV] {
        guard input.count >= start + 4 else { throw PackageError(.invalidInput, "MCUboot image truncated in its \(what)") }
        let found = UInt16(input[start]) | UInt16(input[start + 1]) << 8
        guard found == magic else {
            throw PackageError(
                .invalidInput, "\(what) magic 0x\(String(found, radix: 16)) (expected 0x\(String(magic, radix: 16)))")
        }
        let total = Int(UInt16(input[start + 2]) | UInt16(input[start + 3]) << 8)
        guard total >= 4 else { throw PackageError(.invalidInput, "\(what) of \(total) bytes") }
        guard input.count >= start + total else {
            throw PackageError(.invalidInput, "MCUboot image truncated: the \(what) needs \(total) bytes")
        }
        var reader = ByteReader(input[(start + 4)..<(start + total)])
        var out: [MCUbootTLV] = []
        while !reader.isAtEnd {
            do {
                let type = try reader.readUInt16("TLV type")
                let length = try reader.readUInt16("TLV length")
                out.append(MCUbootTLV(type: type, value: try reader.readBytes(Int(length), "TLV value")))
            } catch {
                throw PackageError(.invalidInput, "\(what): a TLV runs past the area's end (\(error))")
            }
        }
        return out
    }

    /// Header + body + protected TLV area: what the SHA-256 TLV covers.
    public var hashedRegion: ArraySlice<UInt8> {
        bytes[..<(Int(header.headerSize) + Int(header.imageSize) + Int(header.protectedTLVSize))]
    }

    /// The body (the firmware after the header).
    public var body: ArraySlice<UInt8> {
        bytes[Int(header.headerSize)..<(Int(header.headerSize) + Int(header.imageSize))]
    }

    /// The SHA-256 TLV value (what SMP reports as the image `hash`), if there is exactly one.
    public var hashTLV: [UInt8]? {
        let found = tlvs.filter { $0.type == MCUbootTLV.sha256 }
        return found.count == 1 ? found[0].value : nil
    }

    /// SHA-256 of ``hashedRegion``.
    public var computedHash: [UInt8] { Array(SHA256.hash(data: hashedRegion)) }

    public var keyHash: [UInt8]? { tlvs.first { $0.type == MCUbootTLV.keyHash }?.value }

    /// Signature TLVs present.
    public var signatureTLVs: [MCUbootTLV] {
        tlvs.filter { [MCUbootTLV.rsa2048PSS, MCUbootTLV.ecdsaSignature, MCUbootTLV.rsa3072PSS, MCUbootTLV.ed25519].contains($0.type) }
    }

    /// The security counter (protected SEC_CNT TLV), when there is one.
    public var securityCounter: UInt32? {
        guard let value = protectedTLVs.first(where: { $0.type == MCUbootTLV.securityCounter })?.value, value.count == 4 else {
            return nil
        }
        return UInt32(value[0]) | UInt32(value[1]) << 8 | UInt32(value[2]) << 16 | UInt32(value[3]) << 24
    }

    /// Checks the hash (integrity): the SHA-256 TLV must exist once and match. Throws `.imageMismatch` when the
    /// image was changed after signing.
    public func checkHash() throws(PackageError) {
        guard let stored = hashTLV else {
            let count = tlvs.filter { $0.type == MCUbootTLV.sha256 }.count
            throw PackageError(.invalidInput, count == 0 ? "MCUboot image without a SHA-256 TLV" : "MCUboot image with \(count) SHA-256 TLVs")
        }
        guard stored.count == 32 else { throw PackageError(.invalidInput, "SHA-256 TLV of \(stored.count) bytes") }
        guard stored == computedHash else {
            throw PackageError(.imageMismatch, "MCUboot image hash mismatch: the image was modified after signing (tampered or corrupt)")
        }
    }
}
