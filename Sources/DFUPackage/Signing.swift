import BLECore
import Crypto
import Foundation

/// ECDSA P-256/SHA-256 in nrfutil's conventions.
///
/// Secure init packets and ECDSA boot validation store the 64-byte signature as `reverse(r) ‖ reverse(s)` (each
/// 32-byte half little-endian); Legacy 0.8 stores plain big-endian `r ‖ s`.
public enum NordicSignature {
    /// Converts between nrfutil's stored order and the raw big-endian `r ‖ s` (the operation is its own inverse).
    public static func swapHalves(_ signature: [UInt8]) -> [UInt8] {
        guard signature.count == 64 else { return signature }
        return Array(signature[0..<32].reversed()) + Array(signature[32..<64].reversed())
    }

    /// Verifies a signature stored in nrfutil's Secure order over `message`.
    public static func isValid(stored signature: [UInt8], over message: [UInt8], key: P256.Signing.PublicKey) -> Bool {
        isValid(raw: swapHalves(signature), over: message, key: key)
    }

    /// Verifies a plain big-endian `r ‖ s` signature over `message` (SHA-256 is applied here).
    public static func isValid(raw signature: [UInt8], over message: [UInt8], key: P256.Signing.PublicKey) -> Bool {
        guard signature.count == 64,
            let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return key.isValidSignature(parsed, for: message)
    }

    /// Signs `message` and returns the signature in nrfutil's Secure stored order.
    public static func sign(_ message: [UInt8], with key: P256.Signing.PrivateKey) throws(PackageError) -> [UInt8] {
        do {
            let signature = try key.signature(for: message)
            return swapHalves(Array(signature.rawRepresentation))
        } catch {
            throw PackageError(.invalidKey, "signing failed: \(error)")
        }
    }
}

/// Key loading helpers (PEM).
public enum PackageKeys {
    /// Parses a PEM public key (`BEGIN PUBLIC KEY`), or the public half of a PEM private key.
    public static func publicKey(pem: String, name: String = "key") throws(PackageError) -> P256.Signing.PublicKey {
        if let (label, der) = decodePEM(pem), label == "PUBLIC KEY",
            let key = try? P256.Signing.PublicKey(derRepresentation: der)
        {
            return key
        }
        if let key = try? privateKey(pem: pem, name: name) { return key.publicKey }
        throw PackageError(.invalidKey, "\(name) is not a PEM P-256 public or private key")
    }

    /// Parses a PEM private key (`BEGIN EC PRIVATE KEY` as nrfutil writes it, or PKCS#8 `BEGIN PRIVATE KEY`).
    public static func privateKey(pem: String, name: String = "key") throws(PackageError) -> P256.Signing.PrivateKey {
        if let (label, der) = decodePEM(pem), label == "EC PRIVATE KEY" || label == "PRIVATE KEY",
            let key = try? P256.Signing.PrivateKey(derRepresentation: der)
        {
            return key
        }
        throw PackageError(.invalidKey, "\(name) is not a PEM P-256 private key")
    }

    /// The label and DER bytes of the first PEM block. Lenient about line length (OpenSSL-style 64 columns and
    /// Python `ecdsa`'s 76 columns both occur), CRLF and surrounding text.
    static func decodePEM(_ pem: String) -> (label: String, der: [UInt8])? {
        let lines = pem.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = lines.firstIndex(where: { $0.hasPrefix("-----BEGIN ") && $0.hasSuffix("-----") }) else { return nil }
        let label = String(lines[begin].dropFirst("-----BEGIN ".count).dropLast(5))
        guard let end = lines[begin...].firstIndex(of: "-----END \(label)-----") else { return nil }
        let body = lines[(begin + 1)..<end].filter { !$0.contains(":") }.joined()
        guard let der = Data(base64Encoded: body), !der.isEmpty else { return nil }
        return (label, Array(der))
    }

    /// Reads a key file.
    public static func readPEM(_ url: URL) throws(PackageError) -> String {
        do {
            let data = try Data(contentsOf: url)
            guard data.count < 64 << 10 else { throw PackageError(.invalidKey, "\(url.path) is too large for a key file") }
            return String(decoding: data, as: UTF8.self)
        } catch let error as PackageError {
            throw error
        } catch {
            throw PackageError(.io, FileProblem.describe("read", url.path, error))
        }
    }

    /// A new private key in nrfutil's PEM form (`BEGIN EC PRIVATE KEY`, SEC1).
    public static func generatePrivateKeyPEM() -> String {
        let key = P256.Signing.PrivateKey()
        return sec1PEM(key)
    }

    /// SEC1 `ECPrivateKey` PEM (what `nrfutil keys generate` writes).
    public static func sec1PEM(_ key: P256.Signing.PrivateKey) -> String {
        // ECPrivateKey ::= SEQUENCE { version 1, privateKey OCTET STRING (32), [0] prime256v1 OID, [1] BIT STRING pub }
        let oid: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        let pub = Array(key.publicKey.x963Representation)  // 65 bytes, 04 ‖ x ‖ y
        var body: [UInt8] = [0x02, 0x01, 0x01, 0x04, 0x20] + Array(key.rawRepresentation)
        body += [0xA0, UInt8(oid.count)] + oid
        body += [0xA1, UInt8(pub.count + 3), 0x03, UInt8(pub.count + 1), 0x00] + pub
        let der: [UInt8] = [0x30, UInt8(body.count)] + body
        let base64 = Data(der).base64EncodedString()
        var lines: [String] = []
        var rest = Substring(base64)
        while !rest.isEmpty {
            lines.append(String(rest.prefix(64)))
            rest = rest.dropFirst(64)
        }
        return "-----BEGIN EC PRIVATE KEY-----\n" + lines.joined(separator: "\n") + "\n-----END EC PRIVATE KEY-----\n"
    }

    /// x ‖ y each byte-reversed (`nrfutil keys display --format hex`): how the bootloader stores the key.
    public static func nrfutilHex(_ key: P256.Signing.PublicKey) -> String {
        let raw = Array(key.rawRepresentation)
        return (Array(raw[0..<32].reversed()) + Array(raw[32..<64].reversed())).hexString
    }
}
