/// The modulus and exponent of an RSA public key PEM, read without handing malformed input to BoringSSL.
///
/// swift-crypto 3.12's `_RSA.Signing.PublicKey(pemRepresentation:)` frees its `EVP_PKEY` when parsing fails and
/// then again in the backing object's `deinit` (`_CryptoExtras/RSA/RSA_boring.swift`, `BoringSSLRSAPublicKey
/// .Backing.init(pemRepresentation:)`): every PEM that was not an RSA public key (an ECDSA key, a truncated file)
/// could end the process with SIGABRT in `CRYPTO_refcount_dec_and_test_zero`. So bledfu finds the numbers itself
/// and builds the key with `init(n:e:)`, whose failure path frees once.
///
/// Layouts (DER, X.690):
/// - `RSA PUBLIC KEY` (PKCS#1, RFC 8017 A.1.1): `SEQUENCE { INTEGER n, INTEGER e }`
/// - `PUBLIC KEY` (SubjectPublicKeyInfo, RFC 5280 4.1): `SEQUENCE { SEQUENCE { OID 1.2.840.113549.1.1.1, NULL },
///   BIT STRING { 00, RSAPublicKey } }`; any other algorithm is not RSA (nil).
enum RSAPublicKeyDER {
    /// rsaEncryption, 1.2.840.113549.1.1.1 (RFC 8017 A.1), as OID content bytes.
    static let rsaEncryptionOID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]

    static func numbers(pem: String) -> (n: [UInt8], e: [UInt8])? {
        if let der = MCUbootPublicKey.der(pem, label: "RSA PUBLIC KEY") { return pkcs1(der[...]) }
        guard let der = MCUbootPublicKey.der(pem, label: "PUBLIC KEY") else { return nil }
        return subjectPublicKeyInfo(der[...])
    }

    static func subjectPublicKeyInfo(_ der: ArraySlice<UInt8>) -> (n: [UInt8], e: [UInt8])? {
        guard var spki = DERReader(der).whole(tag: 0x30), let algorithmBytes = spki.next(tag: 0x30) else { return nil }
        var algorithm = DERReader(algorithmBytes)
        guard let oid = algorithm.next(tag: 0x06), Array(oid) == rsaEncryptionOID,
            let bits = spki.next(tag: 0x03), bits.first == 0x00, spki.isAtEnd
        else { return nil }
        return pkcs1(bits.dropFirst())
    }

    static func pkcs1(_ der: ArraySlice<UInt8>) -> (n: [UInt8], e: [UInt8])? {
        guard var key = DERReader(der).whole(tag: 0x30), let n = key.next(tag: 0x02), let e = key.next(tag: 0x02),
            key.isAtEnd, !n.isEmpty, !e.isEmpty
        else { return nil }
        return (Array(n), Array(e))
    }
}

/// A DER TLV reader (X.690 8.1): one-byte tags, definite lengths up to 4 length bytes. nil on anything else.
struct DERReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var isAtEnd: Bool { bytes.isEmpty }

    /// The contents of the next element if its tag is `tag`, as a reader.
    mutating func next(tag: UInt8) -> ArraySlice<UInt8>? {
        guard let first = bytes.first, first == tag, bytes.count >= 2 else { return nil }
        var index = bytes.startIndex + 1
        var length = Int(bytes[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count), bytes.endIndex - index >= count else { return nil }
            length = bytes[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
            index += count
        }
        guard bytes.endIndex - index >= length else { return nil }
        let contents = bytes[index..<index + length]
        bytes = bytes[(index + length)...]
        return contents
    }

    /// The contents of the only element, which must have tag `tag`, as a reader.
    func whole(tag: UInt8) -> DERReader? {
        var copy = self
        guard let contents = copy.next(tag: tag), copy.isAtEnd else { return nil }
        return DERReader(contents)
    }
}
