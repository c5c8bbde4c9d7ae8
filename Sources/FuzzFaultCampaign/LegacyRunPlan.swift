import BLECore
import Foundation

/// A Legacy DFU device of the campaign: a profile of `Firmware/` and how a package for it is made.
struct LegacyCampaignDevice: CustomStringConvertible {
    /// The profile name (`bledfu simulate --device NAME`).
    var profile: String
    /// Its application-mode address (the status file's key).
    var address: String
    /// `bledfu package create` options that make a package this device takes.
    var packageOptions: [String]
    /// The largest image the campaign draws for it (inside its bank: SDK 11 nRF51 dual bank holds 0x10800 bytes).
    var maxImage: Int

    var description: String { profile }

    /// SDK 11 dual bank (nRF51, nRF52), the single-bank Adafruit bootloader, InfiniTime (PineTime): each starts in
    /// its application with the DFU service (buttonless jump, or InfiniTime's service in the application).
    static let all = [
        LegacyCampaignDevice(
            profile: "sdk11-nrf51", address: "E1:5D:11:51:00:01", packageOptions: ["--sd-req", "0x80"], maxImage: 40_000),
        LegacyCampaignDevice(
            profile: "sdk11-nrf52", address: "E1:5D:11:52:00:01", packageOptions: ["--sd-req", "0x81"], maxImage: 40_000),
        LegacyCampaignDevice(
            profile: "adafruit-feather52832", address: "E4:AD:F5:28:32:01",
            packageOptions: ["--dev-type", "0x0052", "--dev-revision", "0xADAF", "--sd-req", "0xB7"], maxImage: 40_000),
        LegacyCampaignDevice(profile: "pinetime", address: "E7:1E:71:3E:00:01", packageOptions: [], maxImage: 40_000),
    ]
}

/// Everything random about one Legacy upload of the campaign: the device (every profile in turn), the image size, the
/// pacing, the device's disconnects at seeded Packet byte counts, and the real kills of `bledfu` at seeded byte
/// counts (each followed by a rerun). Every run gets at least one interruption. The plan depends only on the campaign
/// seed and the index (a generator of its own: the Secure runs' draws stay as they were).
struct LegacyRunPlan: CustomStringConvertible {
    var index: Int
    var device: LegacyCampaignDevice
    var imageSize: Int
    var imageSeed: UInt64
    var pacing: String
    /// The device's `disconnect-after-bytes` faults (Packet bytes over the device's life; each fires once).
    var disconnectsAfterBytes: [Int]
    /// SIGKILL the `bledfu` process once the device has received this many Packet bytes (each fires once).
    var killsAfterBytes: [Int]

    /// Pacings the SDK 11 bootloader takes without losses on its 8 receive buffers (the streaming `android` mode
    /// overruns them by design, which the engine tests cover).
    static let pacings = ["adaptive", "ios", "nrfutil", "prn:4"]

    init(index: Int, campaignSeed: UInt64) {
        self.index = index
        var random = CampaignRandom(seed: (campaignSeed &* 0x1000_0001 &+ UInt64(index)) ^ 0x4C45_4741_4359)
        device = LegacyCampaignDevice.all[index % LegacyCampaignDevice.all.count]
        imageSize = (4_000 + random.below(device.maxImage - 4_000)) & ~3
        imageSeed = random.next()
        pacing = random.pick(Self.pacings)
        // What one attempt puts on Packet: the 12-byte sizes, the init packet (14 bytes, 0.5), the image.
        let attempt = 12 + 14 + imageSize
        var disconnects: [Int] = []
        var kills: [Int] = []
        repeat {
            for _ in 0..<random.below(3) { disconnects.append(1 + random.below(attempt)) }
            for _ in 0..<random.below(3) {
                // Kills count over the device's life too: later ones land in the rerun's attempt.
                kills.append(1 + random.below(attempt) + (kills.isEmpty ? 0 : kills.count * attempt / 2))
            }
        } while disconnects.isEmpty && kills.isEmpty
        disconnectsAfterBytes = disconnects.sorted()
        killsAfterBytes = kills.sorted()
    }

    /// The image: deterministic bytes from the plan's seed.
    var image: [UInt8] {
        var random = CampaignRandom(seed: imageSeed)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(imageSize)
        while bytes.count < imageSize {
            withUnsafeBytes(of: random.next().littleEndian) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(imageSize))
    }

    /// The device's fault plan for `bledfu simulate --fault`.
    var faults: [String] { disconnectsAfterBytes.map { "disconnect-after-bytes=\($0)" } }

    var description: String {
        let disconnects = disconnectsAfterBytes.isEmpty ? "" : " disconnect-after-bytes=" + disconnectsAfterBytes.map(String.init).joined(separator: "/")
        let kills = killsAfterBytes.isEmpty ? "" : " kill-after-bytes=" + killsAfterBytes.map(String.init).joined(separator: "/")
        return "legacy run \(index): \(device), \(imageSize) B, \(pacing)" + disconnects + kills
    }
}
