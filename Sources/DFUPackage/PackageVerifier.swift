import BLECore
import Crypto

/// How an image compares with the hash or CRC in its init packet.
public enum HashStatus: Hashable, Sendable, CustomStringConvertible {
    /// SHA-256 stored byte-reversed (nrfutil) and matching.
    case matches
    /// SHA-256 stored in plain order and matching (early SDK 12 packages): accepted with a warning.
    case matchesPlainOrder
    /// Legacy CRC-16 matching.
    case crc16Matches
    case mismatch
    /// No hash or CRC in the init packet, or a hash type this tool does not check.
    case notChecked

    public var description: String {
        switch self {
        case .matches: "SHA-256 matches"
        case .matchesPlainOrder: "SHA-256 matches (plain byte order)"
        case .crc16Matches: "CRC-16 matches"
        case .mismatch: "MISMATCH"
        case .notChecked: "not checked"
        }
    }
}

/// Whether an init-packet signature verifies.
public enum SignatureStatus: Hashable, Sendable, CustomStringConvertible {
    /// Verified by the key at this index of the given keys.
    case valid(keyIndex: Int)
    case invalid
    case unsigned
    /// Signed, but no key was given.
    case noKeyGiven
    /// A signature type other than ECDSA P-256/SHA-256.
    case unsupportedType(UInt32)

    public var description: String {
        switch self {
        case .valid(let index): "valid with key \(index + 1)"
        case .invalid: "INVALID"
        case .unsigned: "unsigned"
        case .noKeyGiven: "signed (no key given)"
        case .unsupportedType(let type): "unsupported signature type \(type)"
        }
    }
}

/// The verification of one part.
public struct PartVerification: Hashable, Sendable {
    public var kind: PartKind
    public var hash: HashStatus
    public var signature: SignatureStatus
    /// One status per `VALIDATE_ECDSA_P256_SHA256` boot validation entry (in init-command order): the signature the
    /// bootloader checks over the image at every boot. Empty when the part has none.
    public var bootSignatures: [SignatureStatus] = []
    /// Each failed check: "application: init packet hash does not match app.bin (SHA-256 …)".
    public var errors: [PackageError]
    public var warnings: [String]
}

/// The verification of a whole package: valid only when every part has no error.
public struct VerificationReport: Hashable, Sendable {
    public var parts: [PartVerification]
    public var errors: [PackageError] { parts.flatMap(\.errors) }
    public var warnings: [String] { parts.flatMap(\.warnings) }
    public var isValid: Bool { errors.isEmpty }
}

extension FirmwarePackage {
    /// Pre-flight checks (pure): image hash/CRC and sizes against the init packets, and, when keys are given, the
    /// init-packet signatures (a signed or unsigned Secure part that no key verifies is an error).
    public func verify(keys: [P256.Signing.PublicKey] = []) -> VerificationReport {
        VerificationReport(parts: parts.map { PackageVerifier.verify($0, keys: keys) })
    }

    /// ``verify(keys:)`` with the keys as PEM texts (public keys, or private keys whose public half is used); a key
    /// that does not parse throws ``PackageError/Code/invalidKey``.
    public func verify(pemKeys: [String]) throws(PackageError) -> VerificationReport {
        var keys: [P256.Signing.PublicKey] = []
        for (index, pem) in pemKeys.enumerated() { keys.append(try PackageKeys.publicKey(pem: pem, name: "key \(index + 1)")) }
        return verify(keys: keys)
    }
}

/// The checks behind ``FirmwarePackage/verify(keys:)``.
public enum PackageVerifier {
    public static func verify(_ part: PackagePart, keys: [P256.Signing.PublicKey]) -> PartVerification {
        var result = PartVerification(kind: part.kind, hash: .notChecked, signature: .unsigned, errors: [], warnings: [])
        switch part.initPacket {
        case .secure(let packet): verifySecure(part, packet, keys: keys, into: &result)
        case .legacy(let packet): verifyLegacy(part, packet, keys: keys, into: &result)
        }
        return result
    }

    private static func fail(_ result: inout PartVerification, _ code: PackageError.Code, _ message: String) {
        result.errors.append(PackageError(code, "\(result.kind): \(message)"))
    }

    static func verifySecure(
        _ part: PackagePart, _ packet: SecureInitPacket, keys: [P256.Signing.PublicKey], into result: inout PartVerification
    ) {
        let command = packet.command
        let length = part.image.count
        let digest = Array(SHA256.hash(data: part.image))
        if let hash = command.hash {
            if hash.type == .sha256 {
                if hash.bytes == digest.reversed() {
                    result.hash = .matches
                } else if hash.bytes == digest {
                    result.hash = .matchesPlainOrder
                    result.warnings.append("\(part.kind): init packet hash is in plain byte order (nrfutil stores it reversed)")
                } else {
                    result.hash = .mismatch
                    fail(&result, .imageMismatch,
                        "init packet hash does not match \(part.binFile) (SHA-256 \(digest.hexString), stored \(hash.bytes.hexString))")
                }
            } else {
                result.warnings.append("\(part.kind): hash type \(hash.type) is not checked")
            }
        } else {
            result.warnings.append("\(part.kind): init packet has no hash")
        }
        checkSizes(part, command, length: length, into: &result)
        checkBootValidation(part, command, keys: keys, into: &result)
        switch packet.signature {
        case nil:
            result.signature = .unsigned
            if !keys.isEmpty { fail(&result, .signatureInvalid, "init packet is not signed but a key was given") }
        case let signature?:
            if let type = packet.signatureType, type != SecureInitPacket.ecdsaP256Sha256 {
                result.signature = .unsupportedType(type)
                if !keys.isEmpty { fail(&result, .signatureInvalid, "signature type \(type) is not supported") }
            } else if keys.isEmpty {
                result.signature = .noKeyGiven
            } else if let index = keys.firstIndex(where: {
                NordicSignature.isValid(stored: signature, over: packet.initCommandBytes, key: $0)
            }) {
                result.signature = .valid(keyIndex: index)
            } else {
                result.signature = .invalid
                fail(&result, .signatureInvalid, "init packet signature does not verify with any given key")
            }
        }
    }

    /// ECDSA boot validation: a 64-byte signature in nrfutil's stored order (r and s each byte-reversed) over the
    /// image, or for SD+BL over the part it belongs to: the SoftDevice (the first `sd_size` bytes) for the first
    /// entry, the bootloader (the rest) for the second. Checked when keys are given.
    private static func checkBootValidation(
        _ part: PackagePart, _ command: InitCommand, keys: [P256.Signing.PublicKey], into result: inout PartVerification
    ) {
        for (index, validation) in command.bootValidation.enumerated() where validation.type == .ecdsaP256Sha256 {
            let field = "boot_validation[\(index)] VALIDATE_ECDSA_P256_SHA256"
            var covered = part.image[...]
            var what = part.binFile
            if (command.type ?? part.kind.firmwareType) == .softdeviceBootloader, let sdSize = command.sdSize, Int(sdSize) <= part.image.count {
                covered = index == 0 ? part.image.prefix(Int(sdSize)) : part.image.dropFirst(Int(sdSize))
                what = index == 0 ? "the SoftDevice part of \(part.binFile)" : "the bootloader part of \(part.binFile)"
            }
            guard validation.bytes.count == 64 else {
                result.bootSignatures.append(.invalid)
                fail(&result, .signatureInvalid, "\(field) signature is \(validation.bytes.count) bytes, expected 64")
                continue
            }
            if keys.isEmpty {
                result.bootSignatures.append(.noKeyGiven)
            } else if let key = keys.firstIndex(where: { NordicSignature.isValid(stored: validation.bytes, over: Array(covered), key: $0) }) {
                result.bootSignatures.append(.valid(keyIndex: key))
            } else {
                result.bootSignatures.append(.invalid)
                fail(&result, .signatureInvalid, "\(field) signature does not verify over \(what) with any given key")
            }
        }
    }

    private static func checkSizes(_ part: PackagePart, _ command: InitCommand, length: Int, into result: inout PartVerification) {
        let type = command.type ?? part.kind.firmwareType
        let expectedTypes: [FirmwareType] = part.kind == .application ? [.application, .externalApplication] : [part.kind.firmwareType]
        if !expectedTypes.contains(type) {
            fail(&result, .imageMismatch, "init packet type \(type) does not match the manifest key \(part.kind)")
        }
        func check(_ field: String, _ value: UInt32?, _ expected: Int) {
            guard let value else {
                fail(&result, .imageMismatch, "init packet has no \(field)")
                return
            }
            if Int(value) != expected {
                fail(&result, .imageMismatch, "init packet \(field) \(value) does not match \(part.binFile) (\(expected) bytes)")
            }
        }
        switch type {
        case .application, .externalApplication: check("app_size", command.appSize, length)
        case .softdevice: check("sd_size", command.sdSize, length)
        case .bootloader: check("bl_size", command.blSize, length)
        case .softdeviceBootloader:
            let sum = Int(command.sdSize ?? 0) + Int(command.blSize ?? 0)
            if command.sdSize == nil || command.blSize == nil || sum != length {
                fail(&result, .imageMismatch,
                    "init packet sd_size + bl_size (\(command.sdSize.map(String.init) ?? "-") + \(command.blSize.map(String.init) ?? "-")) does not match \(part.binFile) (\(length) bytes)")
            }
            if let sd = part.manifestSDSize, sd != command.sdSize {
                fail(&result, .imageMismatch, "manifest sd_size \(sd) differs from the init packet")
            }
            if let bl = part.manifestBLSize, bl != command.blSize {
                fail(&result, .imageMismatch, "manifest bl_size \(bl) differs from the init packet")
            }
        default: result.warnings.append("\(part.kind): image type \(type) sizes not checked")
        }
    }

    static func verifyLegacy(
        _ part: PackagePart, _ packet: LegacyInitPacket, keys: [P256.Signing.PublicKey], into result: inout PartVerification
    ) {
        if let crc = packet.crc16 {
            let actual = CRC16.ccittFalse(part.image)
            if actual == crc {
                result.hash = .crc16Matches
            } else {
                result.hash = .mismatch
                fail(&result, .imageMismatch, "init packet CRC-16 0x\(String(crc, radix: 16)) does not match \(part.binFile) (0x\(String(actual, radix: 16)))")
            }
        }
        if let sha = packet.sha256 {
            let digest = Array(SHA256.hash(data: part.image))
            if sha == digest {
                result.hash = .matches
            } else {
                result.hash = .mismatch
                fail(&result, .imageMismatch, "init packet hash does not match \(part.binFile) (SHA-256 \(digest.hexString))")
            }
        }
        if let length = packet.firmwareLength, Int(length) != part.image.count {
            fail(&result, .imageMismatch, "init packet firmware_length \(length) does not match \(part.binFile) (\(part.image.count) bytes)")
        }
        if part.kind == .softdeviceBootloader, let sd = part.manifestSDSize, let bl = part.manifestBLSize,
            Int(sd) + Int(bl) != part.image.count
        {
            fail(&result, .imageMismatch, "manifest sd_size + bl_size (\(sd) + \(bl)) does not match \(part.binFile) (\(part.image.count) bytes)")
        }
        if let signature = packet.signature {
            if keys.isEmpty {
                result.signature = .noKeyGiven
            } else if let index = keys.firstIndex(where: {
                NordicSignature.isValid(raw: signature, over: packet.signedBytes, key: $0)
            }) {
                result.signature = .valid(keyIndex: index)
            } else {
                result.signature = .invalid
                fail(&result, .signatureInvalid, "legacy init packet signature does not verify with any given key")
            }
        }
    }
}
