import BLECore
import BledfuTestSupport
import DFUCore
import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

@testable import BledfuKit

/// The SMP family through the updater: auto-detection from the package and the services, the upload, test,
/// reset, reconnect, check and confirm, over real socket pairs to a virtual SMP device.
@Suite struct SMPFamilyTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func device(faults: SMPFaults = .none) throws -> VirtualSMPDevice {
        var profile = try JSONDecoder().decode(
            SMPDeviceProfile.self, from: Data(contentsOf: root.appendingPathComponent("Firmware/smp-sensor.json")))
        profile.speedup = 2000
        return VirtualSMPDevice(profile: profile, faults: faults, clock: ContinuousClock())
    }

    static func package() throws -> (PackageSource, MCUbootImage) {
        let bytes = Array(try Data(contentsOf: root.appendingPathComponent("Firmware/samples/smp-sensor-app-v2.bin")))
        return (
            PackageSource(fileName: "smp-sensor-app-v2.bin", bytes: bytes, sha256: DFUSimulatorDigest.sha256Hex(bytes)),
            try MCUbootImage(bytes: bytes)
        )
    }

    static func request(_ package: PackageSource, device: VirtualSMPDevice, settings: [String: String] = [:]) -> UpdateRequest {
        // Deadlines only bound a hang: the suite must pass beside CPU hogs on two cores.
        UpdateRequest(
            package: package, target: .address(PeerAddress(device.profile.address, type: .random)),
            options: UpdateOptions(responseTimeout: .seconds(60), rebootDelay: .milliseconds(50), settings: settings),
            scanTimeout: .seconds(60), connectTimeout: .seconds(60))
    }

    @Test func autoDetectedSMPUpdateEndsConfirmed() async throws {
        let device = try Self.device()
        let (package, image) = try Self.package()
        let result = try await Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(Self.request(package, device: device))
        #expect(result.family == .smp)
        let active = try #require(await device.imageState().active())
        #expect(active.hash == image.hashTLV)
        #expect(active.confirmed)
        #expect(result.summary?.contains("2.0.0, active, confirmed") == true)
    }

    @Test func aLostLinkResumesFromTheDeviceOffset() async throws {
        let device = try Self.device(faults: SMPFaults(plan: try FaultPlan(parsing: "disconnect-after-bytes=20000")))
        let (package, image) = try Self.package()
        _ = try await Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(Self.request(package, device: device))
        #expect(await device.imageState().active()?.hash == image.hashTLV)
        let counters = await device.state().counters
        #expect(counters.uploadBytesReceived <= image.bytes.count + 4 * 2475)
    }

    @Test func uploadOnlyLeavesThePendingDecisionToTheUser() async throws {
        let device = try Self.device()
        let (package, image) = try Self.package()
        _ = try await Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(Self.request(package, device: device, settings: ["smp.confirm": "upload-only"]))
        let state = await device.imageState()
        #expect(state.slot(withHash: image.hashTLV ?? [])?.slot == 1)
        #expect(state.active()?.hash != image.hashTLV)
    }

    @Test func familyPlansOnlyMCUbootFiles() throws {
        let nordic = PackageSource(fileName: "app.zip", bytes: try KitFixture.package().bytes, sha256: "")
        #expect(throws: DFUError.self) { _ = try SMPFamily().plan(nordic, options: UpdateOptions()) }
        do {
            _ = try SMPFamily().plan(nordic, options: UpdateOptions())
        } catch {
            #expect(error.code == .incompatiblePackage)
        }
        let (package, _) = try Self.package()
        let plan = try SMPFamily().plan(package, options: UpdateOptions())
        #expect(plan.parts.map(\.imageIndex) == [0])
        var tampered = package
        tampered.bytes[3000] ^= 1
        do {
            _ = try SMPFamily().plan(tampered, options: UpdateOptions())
            Issue.record("a tampered image was planned")
        } catch {
            #expect(error.code == .invalidPackage)
        }
    }
}
