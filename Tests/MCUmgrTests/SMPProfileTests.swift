import BLECore
import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

/// The bundled SMP profiles and samples (Firmware/smp-*.json, Firmware/samples/smp-*), end to end.
@Suite(.timeLimit(.minutes(5))) struct SMPProfileTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func profile(_ name: String) throws -> SMPDeviceProfile {
        var profile = try JSONDecoder().decode(
            SMPDeviceProfile.self, from: Data(contentsOf: root.appendingPathComponent("Firmware/\(name).json")))
        profile.speedup = 2000
        return profile
    }

    static func images(_ sample: String) throws -> [SMPUpdateImage] {
        let bytes = Array(try Data(contentsOf: root.appendingPathComponent("Firmware/samples/\(sample)")))
        return try MCUbootPackage(bytes: bytes, name: sample).parts.map {
            SMPUpdateImage(imageIndex: $0.imageIndex, bytes: $0.image.bytes, hash: $0.image.hashTLV ?? [], version: $0.image.header.version.smpString)
        }
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

    @Test func braceletTakesBothImagesOfTheNCSZip() async throws {
        let bench = SMPTestBench(profile: try Self.profile("smp-bracelet"))
        let images = try Self.images("smp-bracelet-app-v2.zip")
        #expect(images.map(\.imageIndex) == [0, 1])
        _ = try await SMPTestBench.updater(bench).run(images)
        let state = await bench.device.imageState()
        for image in images {
            let active = try #require(state.active(image: image.imageIndex))
            #expect(active.hash == image.hash && active.confirmed && active.version == "2.0.0")
        }
    }

    @Test func sensorRefusesAnImageSignedWithAnotherKey() async throws {
        // MCUboot validates the signature before the swap: an unsigned image is erased and the old one boots.
        let bench = SMPTestBench(profile: try Self.profile("smp-sensor"))
        let (_, unsigned) = try SMPTestBench.image(size: 30_000, version: "2.0.0", seed: 40)
        await #expect(throws: SMPError(.reverted, "")) { _ = try await SMPTestBench.updater(bench).run([unsigned]) }
        #expect(await bench.device.state().lastBoot?.contains("signature") == true)
        // The signed sample goes in.
        let signed = try Self.images("smp-sensor-app-v2.bin")
        _ = try await SMPTestBench.updater(bench).run(signed)
        #expect(await bench.device.imageState().active()?.hash == signed.first?.hash)
    }

    @Test func persistentStateSurvivesAPowerCycle() async throws {
        let profile = try Self.profile("smp-sensor")
        let bench = SMPTestBench(profile: profile)
        let images = try Self.images("smp-sensor-app-v2.bin")
        _ = try await SMPTestBench.updater(bench, mode: .uploadOnly).run(images)
        let saved = try JSONEncoder().encode(await bench.device.persistentState())
        let restored = VirtualSMPDevice(
            profile: profile, clock: ContinuousClock(), restoring: try JSONDecoder().decode(SMPDevicePersistentState.self, from: saved))
        #expect(await restored.imageState() == (await bench.device.imageState()))
        #expect(await restored.state().upload == nil, "the upload state is RAM")
        let status = try JSONEncoder().encode(await restored.state())
        #expect(try JSONDecoder().decode(SMPDeviceState.self, from: status).images.count == 2)
    }
}
