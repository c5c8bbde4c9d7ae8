import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import LegacyDFU
import Testing

/// The SDK 11 bootloader built with `experimental/dfu_init_template_signing.c` (legacy-dfu.md §5.4): a dfu_version
/// 0.8 init packet (ext id 2, image length, SHA-256, ECDSA P-256 signature r‖s over everything before it) passes
/// `02 01` only with the key the device holds, and Validate checks the image's length and SHA-256.
@Suite(.timeLimit(.minutes(5))) struct SigningTemplateTests {
    static let image = LegacyFixture.firmware(1000)
    /// Firmware/keys/test-signing-key-DO-NOT-USE.pem.
    static let keyURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Firmware/keys/test-signing-key-DO-NOT-USE.pem")
    /// Its public key, X ‖ Y big-endian (`openssl ec -pubin -outform DER | tail -c 64`).
    static let publicKey =
        "15c440deed1c9611a94a2646bb94da73b3acee3fc1dd93b91682ad7543c3ba79"
        + "46670db2dbbce0ff6c67549be4a0c195e1f1767f20ac517dd65fbc39de3f09d8"
    static let profile = LegacyFixture.instant(.sdk11NRF51Signed(address: LegacyFixture.address, key: publicKey))

    static func packet(_ layout: LegacyInitPacket.Layout = .v08, image: [UInt8] = image, softdeviceReq: [UInt16] = [0xFFFE])
        -> LegacyInitPacket
    {
        LegacyInitPacket(
            layout: layout, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 3, softdeviceReq: softdeviceReq,
            image: image)
    }

    static func signed(_ packet: LegacyInitPacket, pem: String? = nil) throws -> [UInt8] {
        let key = try PackageKeys.privateKey(pem: try pem ?? PackageKeys.readPEM(keyURL))
        return try packet.signed(with: key).encode()
    }

    /// The signed packet: `02 01` → `10 02 01`; the image; `04` → `10 04 01`; `05` installs it.
    @Test func signedInitPacketInstallsTheImage() throws {
        var c = LegacyConversation(Self.profile)
        let initPacket = try Self.signed(Self.packet())
        #expect(initPacket.count == 116)  // 12 + 104: id, length, SHA-256, r, s
        #expect(c.prepare(size: Self.image.count, initPacket: initPacket) == [answer(0x02, 0x01)])
        #expect(c.cp([0x03]).isEmpty)
        _ = c.send(Self.image)
        #expect(c.cp([0x04]) == [answer(0x04, 0x01)])
        _ = c.cp([0x05])
        #expect(c.rebooted == .application)
        #expect(c.device.installed.application?.sha256 == LegacyFixture.sha(Self.image))
        #expect(c.device.installed.application?.version == 3)
    }

    /// What `02 01` refuses (`10 02 06`, NRF_ERROR_INVALID_DATA / INVALID_LENGTH / a failed verification): another
    /// key's signature, a byte changed after signing, an unsigned 0.8, a 0.7 (ext id 1) and a 0.5 (a 2-byte CRC
    /// extension, shorter than DFU_INIT_PACKET_EXT_LENGTH_MIN 6).
    @Test func refusedAtInitialize() throws {
        let otherKey = try Self.signed(Self.packet(), pem: PackageKeys.generatePrivateKeyPEM())
        var changed = try Self.signed(Self.packet())
        changed[4] ^= 0x01  // application_version, inside the signed bytes
        let cases: [(String, [UInt8])] = [
            ("another key", otherKey), ("changed after signing", changed), ("unsigned 0.8", Self.packet().encode()),
            ("0.7", Self.packet(.v07).encode()), ("0.5", Self.packet(.v05).encode()),
        ]
        for (name, initPacket) in cases {
            var c = LegacyConversation(Self.profile)
            #expect(c.prepare(size: Self.image.count, initPacket: initPacket) == [answer(0x02, 0x06)], "\(name)")
            // The stored init packet is dropped (dfu_init_pkt_complete): data are refused as "invalid state".
            _ = c.cp([0x03])
            #expect(c.send(Array(Self.image.prefix(20))) == [answer(0x03, 0x02)], "\(name)")
        }
    }

    /// The same signed packet on the plain template (`dfu_init_template.c`): `02 01` passes (no signature check),
    /// Validate reads the ext id's first two bytes as a CRC-16 and fails.
    @Test func thePlainTemplateFailsTheSignedPacketAtValidate() throws {
        var c = LegacyConversation(LegacyFixture.instant(.sdk11NRF51(address: LegacyFixture.address)))
        #expect(c.prepare(size: Self.image.count, initPacket: try Self.signed(Self.packet())) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        _ = c.send(Self.image)
        #expect(c.cp([0x04]) == [answer(0x04, 0x05)])
    }

    /// A signed packet for another image (same length): the signature holds, Validate's SHA-256 does not → `10 04 05`,
    /// and nothing is installed.
    @Test func anotherImageFailsAtValidate() throws {
        var c = LegacyConversation(Self.profile)
        let other = LegacyFixture.firmware(1000, seed: 99)
        #expect(c.prepare(size: Self.image.count, initPacket: try Self.signed(Self.packet(image: other))) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        _ = c.send(Self.image)
        #expect(c.cp([0x04]) == [answer(0x04, 0x05)])
        #expect(c.device.installed.application?.sha256 != LegacyFixture.sha(Self.image))
    }

    /// Only the first SoftDevice entry is compared (the template's loop returns on its first iteration): [0x80, …]
    /// passes on S130 2.0 (FWID 0x80), [0x64, 0x80] is refused although 0x80 is listed.
    @Test func onlyTheFirstSoftDeviceEntryCounts() throws {
        var first = LegacyConversation(Self.profile)
        let listedFirst = try Self.signed(Self.packet(softdeviceReq: [0x80, 0x64]))
        #expect(first.prepare(size: Self.image.count, initPacket: listedFirst) == [answer(0x02, 0x01)])
        var second = LegacyConversation(Self.profile)
        let listedSecond = try Self.signed(Self.packet(softdeviceReq: [0x64, 0x80]))
        #expect(second.prepare(size: Self.image.count, initPacket: listedSecond) == [answer(0x02, 0x06)])
    }

    /// The key the SDK's template holds: nobody has its private half, so our test key's packets are refused.
    @Test func theSDKsOwnKeyRefusesOurPackets() throws {
        let profile = LegacyFixture.instant(
            .sdk11NRF51Signed(address: LegacyFixture.address, key: LegacyDeviceProfile.sdk11SigningTemplateKey))
        var c = LegacyConversation(profile)
        #expect(c.prepare(size: Self.image.count, initPacket: try Self.signed(Self.packet())) == [answer(0x02, 0x06)])
    }
}
