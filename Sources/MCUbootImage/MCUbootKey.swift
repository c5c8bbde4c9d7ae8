import Crypto
import DFUPackage
import Foundation
import _CryptoExtras

/// A public key MCUboot verifies images with (imgtool's key types; smp-mcuboot.md §7.2).
public enum MCUbootPublicKey {
    case rsa(_RSA.Signing.PublicKey)
    case p256(P256.Signing.PublicKey)
    case ed25519(Curve25519.Signing.PublicKey)

    /// The TLV type of this key's signatures.
    public var signatureTLV: UInt16 {
        switch self {
        case .rsa(let key): key.keySizeInBits > 2048 ? MCUbootTLV.rsa3072PSS : MCUbootTLV.rsa2048PSS
        case .p256: MCUbootTLV.ecdsaSignature
        case .ed25519: MCUbootTLV.ed25519
        }
    }

    public var name: String {
        switch self {
        case .rsa(let key): "RSA-\(key.keySizeInBits)"
        case .p256: "ECDSA P-256"
        case .ed25519: "Ed25519"
        }
    }

    /// The bytes imgtool hashes for the KEYHASH TLV (`get_public_bytes`): PKCS#1 RSAPublicKey DER for RSA,
    /// SubjectPublicKeyInfo DER for ECDSA and Ed25519.
    public var publicBytes: [UInt8] {
        switch self {
        case .rsa(let key): Array(key.pkcs1DERRepresentation)
        case .p256(let key): Array(key.derRepresentation)
        case .ed25519(let key): Self.ed25519SPKIPrefix + Array(key.rawRepresentation)
        }
    }

    /// SHA-256 of ``publicBytes``: the KEYHASH TLV value.
    public var keyHash: [UInt8] { Array(SHA256.hash(data: publicBytes)) }

    /// SubjectPublicKeyInfo for Ed25519 (RFC 8410): SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING (32 bytes) }.
    static let ed25519SPKIPrefix: [UInt8] = [0x30, 0x2A, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x03, 0x21, 0x00]
    /// PKCS#8 PrivateKeyInfo for Ed25519 up to the 32-byte seed.
    static let ed25519PKCS8Prefix: [UInt8] = [
        0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
    ]

    /// Parses a PEM public key (`PUBLIC KEY`, `RSA PUBLIC KEY`) or the public half of a PEM private key.
    public init(pem: String, name: String = "key") throws(PackageError) {
        if let numbers = RSAPublicKeyDER.numbers(pem: pem) {
            // Never `_RSA.Signing.PublicKey(pemRepresentation:)`: it double-frees on failure (RSAPublicKeyDER).
            guard let key = try? _RSA.Signing.PublicKey(n: numbers.n, e: numbers.e) else {
                throw PackageError(.invalidKey, "\(name) is an RSA key MCUboot cannot use (2048 or 3072 bits)")
            }
            self = .rsa(key)
        } else if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) {
            self = .p256(key)
        } else if let der = Self.der(pem, label: "PUBLIC KEY"), der.count == 44, Array(der.prefix(12)) == Self.ed25519SPKIPrefix,
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: der.suffix(32))
        {
            self = .ed25519(key)
        } else if let privateKey = try? MCUbootPrivateKey(pem: pem, name: name) {
            self = privateKey.publicKey
        } else {
            throw PackageError(.invalidKey, "\(name) is not a PEM RSA, ECDSA P-256 or Ed25519 key")
        }
    }

    /// The DER bytes of the first PEM block labelled `label`.
    static func der(_ pem: String, label: String) -> [UInt8]? {
        let begin = "-----BEGIN \(label)-----"
        let end = "-----END \(label)-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end, range: start.upperBound..<pem.endIndex) else {
            return nil
        }
        let base64 = pem[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
        return Data(base64Encoded: String(base64)).map { Array($0) }
    }

    /// Checks `signature` over the hashed region of an image (header + body + protected TLVs): ECDSA and RSA
    /// (PSS, SHA-256, salt 32) sign its SHA-256, Ed25519 signs the 32 hash bytes themselves (imgtool `sign_digest`).
    public func isValid(signature: [UInt8], region: ArraySlice<UInt8>) -> Bool {
        switch self {
        case .rsa(let key):
            return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: region, padding: .PSS)
        case .p256(let key):
            guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(parsed, for: region)
        case .ed25519(let key):
            return key.isValidSignature(signature, for: Array(SHA256.hash(data: region)))
        }
    }
}

/// A private key `bledfu package create` signs MCUboot images with.
public enum MCUbootPrivateKey {
    case rsa(_RSA.Signing.PrivateKey)
    case p256(P256.Signing.PrivateKey)
    case ed25519(Curve25519.Signing.PrivateKey)

    public init(pem: String, name: String = "key") throws(PackageError) {
        if let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) {
            self = .rsa(key)
        } else if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
            self = .p256(key)
        } else if let der = MCUbootPublicKey.der(pem, label: "PRIVATE KEY"), der.count == 48,
            Array(der.prefix(16)) == MCUbootPublicKey.ed25519PKCS8Prefix,
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: der.suffix(32))
        {
            self = .ed25519(key)
        } else {
            throw PackageError(.invalidKey, "\(name) is not a PEM RSA, ECDSA P-256 or Ed25519 private key")
        }
    }

    public var publicKey: MCUbootPublicKey {
        switch self {
        case .rsa(let key): .rsa(key.publicKey)
        case .p256(let key): .p256(key.publicKey)
        case .ed25519(let key): .ed25519(key.publicKey)
        }
    }

    /// PKCS#8 PEM of an Ed25519 key (as imgtool writes it).
    public static func ed25519PEM(_ key: Curve25519.Signing.PrivateKey) -> String {
        let der = Data(MCUbootPublicKey.ed25519PKCS8Prefix + Array(key.rawRepresentation))
        return "-----BEGIN PRIVATE KEY-----\n" + der.base64EncodedString(options: [.lineLength64Characters]) + "\n-----END PRIVATE KEY-----\n"
    }

    /// Signs the hashed region of an image (see ``MCUbootPublicKey/isValid(signature:region:)``).
    public func sign(region: [UInt8]) throws(PackageError) -> [UInt8] {
        do {
            switch self {
            case .rsa(let key): return Array(try key.signature(for: region, padding: .PSS).rawRepresentation)
            case .p256(let key): return Array(try key.signature(for: region).derRepresentation)
            case .ed25519(let key): return Array(try key.signature(for: Array(SHA256.hash(data: region))))
            }
        } catch {
            throw PackageError(.invalidKey, "signing failed: \(error)")
        }
    }
}
