import Crypto

@testable import DFUPackage

/// Packages made by the create API (no binary fixtures are committed).
enum Fixtures {
    /// A deterministic pseudo-random image.
    static func image(_ count: Int, seed: UInt32 = 1) -> [UInt8] {
        var state = seed &* 2_654_435_761 | 1
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            return UInt8(truncatingIfNeeded: state)
        }
    }

    static func appBuilder(size: Int = 1000, key: P256.Signing.PrivateKey? = nil) -> PackageBuilder {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: image(size))
        builder.applicationVersion = 3
        builder.hwVersion = 52
        builder.sdReq = [0xB7]
        builder.signingKey = key
        return builder
    }

    static func sdBlAppBuilder(key: P256.Signing.PrivateKey? = nil) -> PackageBuilder {
        var builder = appBuilder(size: 700, key: key)
        builder.softdevice = PackageBuilder.Image(stem: "s132", bytes: image(2000, seed: 2))
        builder.bootloader = PackageBuilder.Image(stem: "bl", bytes: image(500, seed: 3))
        builder.bootloaderVersion = 2
        builder.sdID = [0x101]
        builder.sdReq = [0xB7, 0x101]
        return builder
    }

    static func appFiles() throws -> [(name: String, bytes: [UInt8])] {
        try appBuilder().files()
    }
}
