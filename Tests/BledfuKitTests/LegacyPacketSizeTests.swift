import BLECore
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUSimulator
import Foundation
import LegacyDFU
import Testing

@testable import BledfuKit

/// Packet sizes (issue 15 point 3): 20 bytes where that is all the device takes; MTU − 3 on the Adafruit bootloader
/// with a larger MTU (d28c2e0: MTU up to 247); and `android`, Android-DFU-Library's default (MTU 517 requested,
/// packets of MTU − 3 whatever the device takes, #526), which works on that Adafruit bootloader and fails on
/// InfiniTime, whose DFU service asserts 20-byte writes (#1933).
@Suite(.timeLimit(.minutes(10))) struct LegacyPacketSizeTests {
    static let image = (0..<24_400).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ ($0 >> 7)) }

    static func update(_ make: (BluetoothAddress) -> LegacyDeviceProfile, mode: String, deviceType: UInt16)
        async throws -> (VirtualLegacyDevice, Result<UpdateResult, DFUError>)
    {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(make), clock: ContinuousClock())
        var request = LegacyKitFixture.request(try LegacyKitFixture.package(deviceType: deviceType, image: Self.image))
        request.options.pacing = mode
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        do throws(DFUError) {
            return (device, .success(try await updater.update(request)))
        } catch {
            return (device, .failure(error))
        }
    }

    /// Image packets the device took: its Packet writes minus the sizes and the init packet's.
    static func imagePackets(_ state: LegacyDeviceState) -> Int { state.counters.packetsReceived }

    /// Adafruit, MTU 247: 244-byte packets (100 for the image), for `adaptive` and for `android`; the image installed.
    @Test(arguments: ["adaptive", "android"])
    func adafruitTakesMTUSizedPackets(mode: String) async throws {
        let (device, result) = try await Self.update(LegacyDeviceProfile.adafruitNRF52832, mode: mode, deviceType: 0x0052)
        _ = try result.get()
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(Self.image))
        // 24 400 / 244 = 100 image packets, plus the sizes and one 14-byte init packet write.
        #expect(state.counters.packetsReceived == 100 + 2, "\(state.counters)")
        #expect(state.counters.packetsDropped == 0)
    }

    /// SDK 11 (MTU 23): 20-byte packets, `android` too (its MTU request gets 23).
    @Test func sdk11StaysAt20() async throws {
        let (device, result) = try await Self.update(LegacyDeviceProfile.sdk11NRF52, mode: "android", deviceType: 0xFFFF)
        _ = try result.get()
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(Self.image))
        #expect(state.counters.packetsReceived == 1220 + 2, "\(state.counters)")
    }

    /// InfiniTime (MTU 247 negotiated, 20-byte writes asserted): `adaptive` sends 20-byte packets and installs;
    /// `android` sends 244-byte ones, the watch resets at the first, and the update ends in one clear error with the
    /// old image kept.
    @Test func infiniTimeFailsWithAndroidsDefault() async throws {
        let (good, ok) = try await Self.update(LegacyDeviceProfile.pineTime, mode: "adaptive", deviceType: 0xFFFF)
        _ = try ok.get()
        #expect(await good.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(Self.image))

        let (device, result) = try await Self.update(LegacyDeviceProfile.pineTime, mode: "android", deviceType: 0xFFFF)
        guard case .failure(let error) = result else {
            Issue.record("android's 244-byte packets went onto InfiniTime")
            return
        }
        #expect(!error.message.contains("\n"), "\(error.message)")
        let state = await device.state()
        #expect(state.installed.application?.sha256 != DFUSimulatorDigest.sha256Hex(Self.image))
        #expect(state.installed.application?.version == 1, "\(String(describing: state.installed.application))")
    }
}
