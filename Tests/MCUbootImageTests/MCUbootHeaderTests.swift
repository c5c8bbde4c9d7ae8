import BLECore
import DFUPackage
import Foundation
import MCUbootImage
import Testing

@Suite(.timeLimit(.minutes(2))) struct MCUbootHeaderTests {
    /// magic 0x96f3b83d | load 0 | hdr 0x200 | prot 0 | img 0x1388 | flags 0 | 1.2.3+4 | pad
    static let header: [UInt8] = [UInt8](hexString: "3db8f396 00000000 0002 0000 88130000 00000000 01 02 0300 04000000 00000000") ?? []

    @Test func headerBothDirections() throws {
        let decoded = try MCUbootHeader(decoding: Self.header[...])
        #expect(decoded == MCUbootHeader(imageSize: 5000, version: MCUbootVersion(major: 1, minor: 2, revision: 3, build: 4)))
        #expect(decoded.encoded == Self.header)
        for length in 0..<Self.header.count {
            #expect(throws: PackageError(.invalidInput, "")) { _ = try MCUbootHeader(decoding: Self.header.prefix(length)) }
        }
        var wrong = Self.header
        wrong[0] = 0x3C  // version 1 magic
        #expect(throws: PackageError(.invalidInput, "")) { _ = try MCUbootHeader(decoding: wrong[...]) }
    }

    @Test func versionsParseAndCompare() {
        #expect(MCUbootVersion("1.2.3+4") == MCUbootVersion(major: 1, minor: 2, revision: 3, build: 4))
        #expect(MCUbootVersion("1.2.3.4") == MCUbootVersion(major: 1, minor: 2, revision: 3, build: 4))
        #expect(MCUbootVersion("2") == MCUbootVersion(major: 2))
        #expect(MCUbootVersion("1.2.x") == nil)
        #expect(MCUbootVersion("256.0.0") == nil)
        #expect(MCUbootVersion(major: 1, minor: 2, revision: 3, build: 4).smpString == "1.2.3.4")
        #expect(MCUbootVersion(major: 1, minor: 2, revision: 3).smpString == "1.2.3")
        let a = MCUbootVersion(major: 1, minor: 0, revision: 0, build: 5)
        let b = MCUbootVersion(major: 1, minor: 0, revision: 0, build: 1)
        #expect(MCUbootVersion.compare(a, b, useBuild: false) == 0)
        #expect(MCUbootVersion.compare(a, b, useBuild: true) == 1)
    }

    @Test func unsignedImageRoundTripAndTamperDetection() throws {
        let image = try MCUbootImage.sign(
            firmware: Imgtool.firmware(3000), version: MCUbootVersion(major: 1), key: nil, securityCounter: 7)
        #expect(image.securityCounter == 7)
        #expect(image.hashTLV == image.computedHash)
        #expect(try image.verify(key: nil).hash == image.computedHash)
        let reparsed = try MCUbootImage(bytes: image.bytes + [UInt8](repeating: 0xFF, count: 100))
        #expect(reparsed == image, "trailing padding is not part of the image")
        for index in [0x200, 0x200 + 2999, image.bytes.count - 40] {
            var bytes = image.bytes
            bytes[index] ^= 0x80
            #expect(throws: PackageError.self) { _ = try MCUbootImage(bytes: bytes).verify(key: nil) }
        }
        // Signing an image again is refused.
        #expect(throws: PackageError(.invalidInput, "")) {
            _ = try MCUbootImage.sign(firmware: image.bytes, version: MCUbootVersion(major: 1), key: nil)
        }
    }

    @Test func hexRoundTrip() throws {
        let bytes = Imgtool.firmware(70_000)
        let text = MCUbootHex.write(bytes, address: 0x0000_C000)
        let (address, back) = try MCUbootHex.read(text)
        #expect(address == 0xC000)
        #expect(back == bytes)
    }
}
