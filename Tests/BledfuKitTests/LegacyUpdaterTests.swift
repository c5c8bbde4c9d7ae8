import BLECore
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUSimulator
import GATT
import LegacyDFU
import Testing

@testable import BledfuKit

/// Legacy packages and devices for the updater: SDK 11 nRF51 (S130 2.0.0, FWID 0x80), instant flash.
enum LegacyKitFixture {
    static let address = BluetoothAddress("E1:5D:11:51:00:01")!
    static let image = (0..<8_000).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) }

    static func profile(_ make: (BluetoothAddress) -> LegacyDeviceProfile = LegacyDeviceProfile.sdk11NRF51) -> LegacyDeviceProfile {
        var profile = make(address)
        profile.speedup = .infinity
        return profile
    }

    static func package(deviceType: UInt16 = 0xFFFF, layout: LegacyInitPacket.Layout = .v05) throws -> PackageSource {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: image)
        builder.applicationVersion = 2
        builder.legacy = LegacyOptions(layout: layout, deviceType: deviceType)
        let bytes = try builder.archive()
        return PackageSource(fileName: "legacy-app.zip", bytes: bytes, sha256: DFUSimulatorDigest.sha256Hex(bytes))
    }

    static func request(_ package: PackageSource, family: DFUFamilyID? = nil) -> UpdateRequest {
        var request = UpdateRequest(
            package: package, target: .address(PeerAddress(address, type: .random)),
            options: UpdateOptions(pacing: "adaptive", rebootDelay: .zero), reconnect: ReconnectPolicy(initialDelay: .zero))
        request.family = family
        return request
    }
}

@Suite struct LegacyUpdaterTests {
    /// Detection from the services and DFU Version (0.1: application), the legacy buttonless jump, the bootloader
    /// at the same address (peer data), the image, activation: the updater with its default families.
    @Test func applicationJumpAndImage() async throws {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        let adapter = VirtualDeviceAdapter(devices: [device])
        let updater = Updater(adapter: adapter, clock: ContinuousClock())
        let run = updater.start(LegacyKitFixture.request(try LegacyKitFixture.package()))
        var events: [UpdateEvent] = []
        for await event in run { events.append(event) }
        let result = try await run.result()
        #expect(result.family == .legacy)
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
        #expect(state.mode == .application)
        #expect(events.contains(.applicationMode(address: LegacyKitFixture.address.description, bonded: false)))
        #expect(events.contains(.updaterReady(family: .legacy, address: LegacyKitFixture.address.description)))
    }

    /// A link lost in the middle of the image: the next connection finds the bootloader busy, resets it (the dual-bank
    /// device comes back as its old application), jumps again and sends the image from zero; the statistics count
    /// the bytes sent again, a warning says why.
    @Test func lostLinkRestartsFromZero() async throws {
        let device = VirtualLegacyDevice(
            profile: LegacyKitFixture.profile(), faults: try FaultPlan(parsing: "disconnect-after-bytes=3000"),
            clock: ContinuousClock())
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let run = updater.start(LegacyKitFixture.request(try LegacyKitFixture.package()))
        var warnings: [String] = []
        for await event in run { if case .warning(let text) = event { warnings.append(text) } }
        let result = try await run.result()
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
        #expect(result.statistics.bytesResent >= 3000)
        #expect(warnings.contains { $0.contains("link lost") && $0.contains("will be sent again") })
        #expect(warnings.contains { $0.contains("busy with an earlier transfer") })
    }

    /// A Secure package on a Legacy device, and a Legacy package on a Secure device: one line each, nothing sent.
    @Test func packageOfTheOtherFamily() async throws {
        let legacyDevice = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: LegacyKitFixture.image)
        builder.applicationVersion = 2
        builder.hwVersion = 52
        builder.sdReq = [0x80]
        let secureBytes = try builder.archive()
        let secure = PackageSource(fileName: "secure.zip", bytes: secureBytes, sha256: DFUSimulatorDigest.sha256Hex(secureBytes))
        do {
            _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [legacyDevice]), clock: ContinuousClock())
                .update(LegacyKitFixture.request(secure))
            Issue.record("a Secure package went onto a Legacy device")
        } catch {
            #expect(error.code == .incompatiblePackage, "\(error)")
            #expect(error.message.contains("is a Secure DFU package"), "\(error.message)")
        }
        #expect(await legacyDevice.state().counters.packetsReceived == 0)

        let secureProfile = DeviceProfile(
            name: "Bracelet", address: LegacyKitFixture.address, hwVersion: 52, softDeviceFWID: 0xB7, requireSignedApp: false,
            speedup: .infinity)
        let secureDevice = VirtualDevice(profile: secureProfile, clock: ContinuousClock())
        let legacy = try LegacyKitFixture.package()
        do {
            _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [secureDevice]), clock: ContinuousClock())
                .update(LegacyKitFixture.request(legacy))
            Issue.record("a Legacy package went onto a Secure device")
        } catch {
            #expect(error.code == .incompatiblePackage, "\(error)")
            #expect(error.message.contains("is a Legacy DFU package"), "\(error.message)")
        }
    }

    /// InfiniTime: no jump (the service is in the application), the image, the watch resets into it.
    @Test func pineTime() async throws {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(LegacyDeviceProfile.pineTime), clock: ContinuousClock())
        let result = try await Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(LegacyKitFixture.request(try LegacyKitFixture.package(), family: .legacy))
        #expect(result.family == .legacy)
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
    }
}
