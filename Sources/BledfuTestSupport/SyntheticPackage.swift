import BLECore
import DFUCore
import DFUPackage
import DFUSimulator

/// Synthetic images and packages for the tests and the fault campaign: pseudo-random images from a seed (the
/// package's one generator, ``SplitMix64``) and unsigned packages built by the shipped ``PackageBuilder``, handed
/// over as the updater reads them (``PackageSource``).
public enum SyntheticPackage {
    /// `count` pseudo-random bytes: the same bytes for the same seed on every machine.
    public static func image(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return random.bytes(count)
    }

    /// A Secure DFU application package (unsigned, CRC boot validation) as nrfutil would build it.
    public static func secureApplication(
        _ image: [UInt8], version: UInt32 = 2, hwVersion: UInt32 = 52, sdReq: [UInt32] = [0xB7]
    ) throws -> [UInt8] {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: image)
        builder.applicationVersion = version
        builder.hwVersion = hwVersion
        builder.sdReq = sdReq
        return try builder.archive()
    }

    /// A Legacy DFU application package (init packet `layout`, the device type it names).
    public static func legacyApplication(
        _ image: [UInt8], version: UInt32 = 2, layout: LegacyInitPacket.Layout = .v05, deviceType: UInt16 = 0xFFFF
    ) throws -> [UInt8] {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: image)
        builder.applicationVersion = version
        builder.legacy = LegacyOptions(layout: layout, deviceType: deviceType)
        return try builder.archive()
    }

    /// Package bytes as the updater reads a file (its SHA-256 as `bledfu flash` computes it).
    public static func source(_ bytes: [UInt8], fileName: String) -> PackageSource {
        PackageSource(fileName: fileName, bytes: bytes, sha256: DFUSimulatorDigest.sha256Hex(bytes))
    }
}
