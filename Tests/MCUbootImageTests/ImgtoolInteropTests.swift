import BLECore
import DFUPackage
import Foundation
import MCUbootImage
import Testing

/// Both ways with MCUboot's own imgtool (PyPI, tools/python-env): images imgtool signs verify here exactly when
/// `imgtool verify` accepts them; images bledfu signs pass `imgtool verify`.
@Suite(.timeLimit(.minutes(10)), .enabled(if: Imgtool.shouldRun, "imgtool is not installed (tools/python-env)"))
struct ImgtoolInteropTests {
    static let keyTypes = ["rsa-2048", "rsa-3072", "ecdsa-p256", "ed25519"]

    func keygen(_ type: String, in dir: URL) async throws -> (privatePEM: URL, publicPEM: URL) {
        let key = dir.appendingPathComponent("\(type).pem")
        let pub = dir.appendingPathComponent("\(type).pub.pem")
        let made = try await Imgtool.imgtool(["keygen", "-k", key.path, "-t", type])
        #expect(made.status == 0, "\(made.stderr)")
        let exported = try await Imgtool.imgtool(["getpub", "-k", key.path, "-e", "pem", "-o", pub.path])
        #expect(exported.status == 0, "\(exported.stderr)")
        return (key, pub)
    }

    func imgtoolVerify(_ image: URL, key: URL) async throws -> Bool {
        try await Imgtool.imgtool(["verify", "-k", key.path, image.path]).status == 0
    }

    @Test(arguments: keyTypes)
    func imagesImgtoolSignsVerifyHere(_ type: String) async throws {
        let dir = try Imgtool.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = try await keygen(type, in: dir)
        let other = try await keygen(type, in: dir.appendingPathComponent("other").creatingDirectory())
        let raw = dir.appendingPathComponent("app.bin")
        try Data(Imgtool.firmware(5000)).write(to: raw)
        for ext in ["bin", "hex"] {
            let signed = dir.appendingPathComponent("app.signed.\(ext)")
            let sign = try await Imgtool.imgtool(
                [
                    "sign", "--key", key.privatePEM.path, "--header-size", "0x200", "--pad-header", "--align", "4",
                    "--version", "1.2.3+4", "--slot-size", "0x40000",
                ] + (ext == "hex" ? ["--hex-addr", "0xC000"] : []) + [raw.path, signed.path])
            try #require(sign.status == 0, "\(sign.stderr)")
            let bytes = Array(try Data(contentsOf: signed))
            let package = try MCUbootPackage(bytes: bytes, name: signed.lastPathComponent)
            let image = try #require(package.parts.first?.image)
            #expect(image.header.version == MCUbootVersion(major: 1, minor: 2, revision: 3, build: 4))
            #expect(image.body.elementsEqual(Imgtool.firmware(5000)))
            let publicKey = try MCUbootPublicKey(pem: String(contentsOf: key.publicPEM, encoding: .utf8))
            // Same verdict as imgtool: the right key verifies, another key does not.
            #expect(try await imgtoolVerify(signed, key: key.publicPEM))
            #expect(try image.verify(key: publicKey, slotSize: 0x40000).signedBy == publicKey.name)
            let otherKey = try MCUbootPublicKey(pem: String(contentsOf: other.publicPEM, encoding: .utf8))
            #expect(try await !imgtoolVerify(signed, key: other.publicPEM))
            #expect(throws: PackageError(.signatureInvalid, "")) { try image.verify(key: otherKey) }
            // A slot too small for the image is refused.
            #expect(throws: PackageError(.invalidInput, "")) { try image.verify(key: publicKey, slotSize: 4096) }
        }
        // Tampered (one body bit) and truncated images: imgtool refuses, and so do we.
        let signed = dir.appendingPathComponent("app.signed.bin")
        var bytes = Array(try Data(contentsOf: signed))
        bytes[0x200 + 100] ^= 0x01
        let tampered = dir.appendingPathComponent("tampered.bin")
        try Data(bytes).write(to: tampered)
        #expect(try await !imgtoolVerify(tampered, key: key.publicPEM))
        #expect(throws: PackageError(.imageMismatch, "")) { try MCUbootImage(bytes: bytes).checkHash() }
        let original = Array(try Data(contentsOf: signed))
        for cut in [10, 31, 0x200, 0x200 + 5000, original.count - 1] {
            #expect(throws: PackageError.self, "cut at \(cut)") { _ = try MCUbootImage(bytes: Array(original.prefix(cut))).verify(key: nil) }
        }
    }

    @Test(arguments: keyTypes)
    func imagesBledfuSignsPassImgtoolVerify(_ type: String) async throws {
        let dir = try Imgtool.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = try await keygen(type, in: dir)
        let privateKey = try MCUbootPrivateKey(pem: String(contentsOf: key.privatePEM, encoding: .utf8))
        let image = try MCUbootImage.sign(
            firmware: Imgtool.firmware(7001, seed: 3), version: MCUbootVersion(major: 2, minor: 0, revision: 1, build: 9),
            key: privateKey)
        let file = dir.appendingPathComponent("ours.bin")
        try Data(image.bytes).write(to: file)
        let verdict = try await Imgtool.imgtool(["verify", "-k", key.publicPEM.path, file.path])
        #expect(verdict.status == 0, "\(verdict.stdout)\(verdict.stderr)")
        #expect(verdict.stdout.contains("Image was correctly validated"), "\(verdict.stdout)")
        #expect(verdict.stdout.contains("2.0.1.9") || verdict.stdout.contains("2.0.1+9"), "\(verdict.stdout)")
        // The hex form at a slot address verifies too.
        let hex = dir.appendingPathComponent("ours.hex")
        try MCUbootHex.write(image.bytes, address: 0xC000).write(to: hex, atomically: true, encoding: .utf8)
        #expect(try await imgtoolVerify(hex, key: key.publicPEM))
        #expect(try MCUbootPackage(bytes: Array(Data(contentsOf: hex)), name: "ours.hex").parts.first?.image == image)
        // imgtool's own signature of the same firmware carries the same key hash.
        let raw = dir.appendingPathComponent("fw.bin")
        try Data(Imgtool.firmware(7001, seed: 3)).write(to: raw)
        let theirs = dir.appendingPathComponent("theirs.bin")
        let sign = try await Imgtool.imgtool([
            "sign", "--key", key.privatePEM.path, "--header-size", "0x200", "--pad-header", "--align", "4", "--version",
            "2.0.1+9", "--slot-size", "0x40000", raw.path, theirs.path,
        ])
        try #require(sign.status == 0, "\(sign.stderr)")
        let reference = try MCUbootImage(bytes: Array(Data(contentsOf: theirs)))
        #expect(reference.keyHash == image.keyHash)
        #expect(reference.hashTLV == image.hashTLV, "same header, body and TLV layout give the same image hash")
    }
}

extension URL {
    func creatingDirectory() throws -> URL {
        try FileManager.default.createDirectory(at: self, withIntermediateDirectories: true)
        return self
    }
}
