import BLECore
import Crypto
import LegacyDFU

/// The SDK 11 bootloader built with `experimental/dfu_init_template_signing.c` (legacy-dfu.md §5.4): a dfu_version
/// 0.8 init packet, its ECDSA P-256 signature checked at `02 01`, the image's length and SHA-256 at Validate.
///
/// The extension after the SoftDevice list (`DFU_INIT_PACKET_POS_EXT_*`):
///
///     +0  u32 identifier   2 = DFU_INIT_PACKET_USES_ECDS (0 CRC-16, 1 hash: refused)
///     +4  u32 image length
///     +8  SHA-256 of the image (32)
///     +40 signature r (32) ‖ s (32), over the init packet up to +40 (DFU_INIT_PACKET_EXT_LENGTH_SIGNED)
extension LegacyDeviceProfile {
    /// `Qx` ‖ `Qy` of `dfu_init_template_signing.c` (SDK 11.0.0): the key a bootloader built from the template
    /// unchanged holds. Nobody outside Nordic has its private half: such a device refuses every package.
    public static let sdk11SigningTemplateKey =
        "39b0583d270791386aa3360fa2b5867eaebaf7a3f4815f7802f2a121d5218412"
        + "4a0dfea47750b1b526c09dddf02490576c643bd3df923bb3479783d4fc76f59d"

    /// The SDK 11 nRF51 device of ``sdk11NRF51(address:)`` with the signing template and `key` (`Qx` ‖ `Qy` hex):
    /// `dfu_types.h` moves the bootloader down for the crypto code (BOOTLOADER_REGION_START 0x39C00, settings page
    /// 0x3D800).
    public static func sdk11NRF51Signed(address: BluetoothAddress, key: String) -> LegacyDeviceProfile {
        var profile = sdk11NRF51(address: address)
        profile.initSigningKey = key
        profile.layout = LegacyFlashLayout(pageSize: 0x400, bootloaderStart: 0x39C00, bootloaderMaxSize: 0x3D800 - 0x39C00)
        return profile
    }
}

extension LegacyBootloader {
    /// Where the extension starts (after the SoftDevice list).
    var extensionStart: Int { 10 + 2 * Int(word16(8)) }

    /// dfu_init_prevalidate of the signing template. Every refusal (NRF_ERROR_INVALID_LENGTH, NRF_ERROR_INVALID_DATA,
    /// a failed verification) is answered "operation failed" (`10 02 06`), as for the plain template.
    func signedPrevalidate() -> LegacyStatus {
        guard initPacket.count >= 12 else { return .operationFailed }  // sizeof(dfu_init_packet_t)
        let start = extensionStart
        // DFU_INIT_PACKET_EXT_LENGTH_MIN 6 (no upper bound: copied into a 104-byte buffer).
        guard initPacket.count >= start + 6 else { return .operationFailed }
        if profile.deviceType != 0xFFFF, word16(0) != profile.deviceType { return .operationFailed }
        if profile.deviceRevision != 0xFFFF, word16(2) != profile.deviceRevision { return .operationFailed }
        // The loop returns on its first iteration: only the first entry of the list is compared (an empty list
        // passes).
        if word16(8) > 0, word16(10) != 0xFFFE, word16(10) != softDeviceFWID { return .operationFailed }
        guard word32(start) == 2 else { return .operationFailed }  // DFU_INIT_PACKET_USES_ECDS
        // The signature is read from the 104-byte extension buffer: a shorter extension cannot carry it.
        guard initPacket.count >= start + 104, let key = signingKey else { return .operationFailed }
        let signed = Array(initPacket[0..<(start + 40)])
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: initPacket[(start + 40)..<(start + 104)]),
            key.isValidSignature(signature, for: signed)
        else { return .operationFailed }
        return .success
    }

    /// dfu_init_postvalidate of the signing template: the image's length and SHA-256 as the signed extension says.
    func signedPostvalidate(_ image: [UInt8]) -> Bool {
        let start = extensionStart
        guard initPacket.count >= start + 40, word32(start + 4) == UInt32(truncatingIfNeeded: image.count) else { return false }
        return Array(SHA256.hash(data: image)) == Array(initPacket[(start + 8)..<(start + 40)])
    }

    /// The profile's key; nil when it is not 64 bytes of hex or not a point on P-256 (every package is refused).
    var signingKey: P256.Signing.PublicKey? {
        guard let hex = profile.initSigningKey, let bytes = [UInt8](hexString: hex), bytes.count == 64 else { return nil }
        return try? P256.Signing.PublicKey(rawRepresentation: bytes)
    }

    func word32(_ offset: Int) -> UInt32 {
        guard offset + 4 <= initPacket.count else { return 0 }
        return (0..<4).reduce(UInt32(0)) { $0 | UInt32(initPacket[offset + $1]) << (8 * UInt32($1)) }
    }
}
