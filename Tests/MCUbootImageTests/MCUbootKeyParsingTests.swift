import DFUPackage
import Foundation
@testable import MCUbootImage
import Testing

/// Public keys from PEM: RSA is read by bledfu's own DER reader (swift-crypto 3.12's RSA PEM parser double-frees on
/// failure and aborted the process on any non-RSA or truncated PEM), ECDSA P-256 and Ed25519 by swift-crypto.
@Suite(.timeLimit(.minutes(2))) struct MCUbootKeyParsingTests {
    /// An RSA-2048 public key (openssl genrsa 2048; `rsa -pubout`): SubjectPublicKeyInfo.
    static let rsaSPKI = """
-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA2y0+NYW0EqJodFss96f7
fv+Smx5QuEO2uKEUg3w2ilexvpAtOAdKQiFmqNzY2iUxto7lrBpKSmrIQKWGndB2
119TnvMxHCwZXWskcP3VhiNRiHV4CZrhZFsibIYxi0lcoT5LweJfaCMx2peGDzgx
EByVx0wX5LPzHoWEt8jU3ipv4rENYwbxNnYFG24pfuVHT0+P3Fg0A4CGLtMBbhqt
llFEy5rxu0hKOMk1LPGiJMbeXJYhQg62YCFLEVoIIwWJ+zXFifVRpbf8NCEb9uiy
Addg1rZy0Du2Gy0TZvWYP6qIm/5SbY1A9elgIBZbbnPaVmvFzEx3os8tteB1LXgI
TQIDAQAB
-----END PUBLIC KEY-----
"""
    /// The same key as PKCS#1 (`rsa -RSAPublicKey_out`).
    static let rsaPKCS1 = """
-----BEGIN RSA PUBLIC KEY-----
MIIBCgKCAQEA2y0+NYW0EqJodFss96f7fv+Smx5QuEO2uKEUg3w2ilexvpAtOAdK
QiFmqNzY2iUxto7lrBpKSmrIQKWGndB2119TnvMxHCwZXWskcP3VhiNRiHV4CZrh
ZFsibIYxi0lcoT5LweJfaCMx2peGDzgxEByVx0wX5LPzHoWEt8jU3ipv4rENYwbx
NnYFG24pfuVHT0+P3Fg0A4CGLtMBbhqtllFEy5rxu0hKOMk1LPGiJMbeXJYhQg62
YCFLEVoIIwWJ+zXFifVRpbf8NCEb9uiyAddg1rZy0Du2Gy0TZvWYP6qIm/5SbY1A
9elgIBZbbnPaVmvFzEx3os8tteB1LXgITQIDAQAB
-----END RSA PUBLIC KEY-----
"""

    static func pem(_ der: some Collection<UInt8>, label: String) -> String {
        "-----BEGIN \(label)-----\n" + Data(der).base64EncodedString(options: [.lineLength64Characters])
            + "\n-----END \(label)-----\n"
    }

    @Test func rsaInBothForms() throws {
        let spki = try MCUbootPublicKey(pem: Self.rsaSPKI)
        let pkcs1 = try MCUbootPublicKey(pem: Self.rsaPKCS1)
        #expect(spki.publicBytes == pkcs1.publicBytes)
        // publicBytes is PKCS#1 for RSA: exactly the DER of the RSA PUBLIC KEY block.
        #expect(spki.publicBytes == MCUbootPublicKey.der(Self.rsaPKCS1, label: "RSA PUBLIC KEY"))
        guard case .rsa = spki else { Issue.record("not read as RSA"); return }
    }

    /// Every truncated prefix of both RSA forms is refused with one error; before bledfu read the DER itself,
    /// these aborted the process (double free in BoringSSL's EVP_PKEY on swift-crypto's failure path).
    @Test func everyTruncatedRSAKeyIsRefused() throws {
        for (text, label) in [(Self.rsaSPKI, "PUBLIC KEY"), (Self.rsaPKCS1, "RSA PUBLIC KEY")] {
            let der = try #require(MCUbootPublicKey.der(text, label: label))
            for length in 0..<der.count {
                #expect(throws: PackageError(.invalidKey, "")) {
                    _ = try MCUbootPublicKey(pem: Self.pem(der.prefix(length), label: label), name: "k.pem")
                }
            }
        }
    }

    @Test func otherKindsAreNotTakenForRSA() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let p256 = try String(contentsOf: root.appendingPathComponent("Firmware/keys/mcuboot-test-key-DO-NOT-USE.pub.pem"), encoding: .utf8)
        for _ in 0..<50 {  // the abort was a double free: repetition made it certain
            guard case .p256 = try MCUbootPublicKey(pem: p256) else { Issue.record("P-256 key not read as P-256"); return }
        }
        #expect(RSAPublicKeyDER.numbers(pem: p256) == nil)
        #expect(throws: PackageError(.invalidKey, "")) { _ = try MCUbootPublicKey(pem: "not a key", name: "k.pem") }
    }

    @Test func derReaderLengths() {
        // 30 81 03 | 02 01 05: a SEQUENCE in the long length form holding INTEGER 5.
        var reader = DERReader([0x30, 0x81, 0x03, 0x02, 0x01, 0x05][...])
        let sequence = reader.next(tag: 0x30)
        #expect(sequence.map(Array.init) == [0x02, 0x01, 0x05])
        #expect(reader.isAtEnd)
        var short = DERReader([0x30, 0x05, 0x02][...])  // claims 5 bytes, holds 1: truncated
        #expect(short.next(tag: 0x30) == nil)
        var wide = DERReader([0x30, 0x85, 0, 0, 0, 0, 1][...])  // 5 length bytes: refused
        #expect(wide.next(tag: 0x30) == nil)
    }
}
