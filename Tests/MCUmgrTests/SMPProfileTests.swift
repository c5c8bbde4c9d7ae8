import BLECore
import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

/// The bundled SMP profiles (Firmware/smp-*.json) as virtual devices. Whole updates with them and the samples run
/// through the shipped updater: BledfuKitTests' SMPUpdateTests.
@Suite(.timeLimit(.minutes(5))) struct SMPProfileTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func profile(_ name: String) throws -> SMPDeviceProfile {
        var profile = try JSONDecoder().decode(
            SMPDeviceProfile.self, from: Data(contentsOf: root.appendingPathComponent("Firmware/\(name).json")))
        profile.speedup = 2000
        return profile
    }

    @Test func profilesDecodeAsSMPDevices() async throws {
        let sensor = try Self.profile("smp-sensor")
        #expect(sensor.family == "smp" && sensor.chip == "nRF52840" && sensor.images.count == 1)
        let bracelet = try Self.profile("smp-bracelet")
        #expect(bracelet.chip == "nRF5340" && bracelet.images.count == 2)
        #expect(!bracelet.mcuboot.publicKeys.isEmpty && bracelet.mcuboot.downgradePrevention)
        let device = VirtualSMPDevice(profile: sensor, clock: ContinuousClock())
        let advertisement = await device.currentAdvertisement
        #expect(AdvertisingData(parsing: advertisement.data).name == "SMP Sensor")
    }
}
