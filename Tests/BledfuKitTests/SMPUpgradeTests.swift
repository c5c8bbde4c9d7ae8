import BLECore
import BledfuTestSupport
import DFUCore
import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

@testable import BledfuKit

/// `smp.upgrade` (`bledfu flash --upgrade`): the first chunk carries `upgrade: true`, and Zephyr's img_mgmt refuses an
/// image not newer than the running one before it erases anything: rc 27 (CURRENT_VERSION_IS_NEWER) in SMP v2's
/// `err` form, rc 6 (EBADSTATE) in v1 (smp-mcuboot.md §2.3, §4.1). Without the setting the same image goes on.
@Suite(.timeLimit(.minutes(10))) struct SMPUpgradeTests {
    /// The sensor profile running `running` (the sample to send is 2.0.0), answering SMP v2 or v1 only.
    static func device(running: String, smpV2: Bool = true) throws -> VirtualSMPDevice {
        var profile = try JSONDecoder().decode(
            SMPDeviceProfile.self, from: Data(contentsOf: SMPFamilyTests.root.appendingPathComponent("Firmware/smp-sensor.json")))
        profile.speedup = 2000
        profile.images = [SMPInstalledImage(version: running, size: 32 * 1024)]
        profile.smp.smpV2 = smpV2
        return VirtualSMPDevice(profile: profile, clock: ContinuousClock())
    }

    static func update(_ device: VirtualSMPDevice, upgrade: String?) async throws(DFUError) -> UpdateResult {
        let (package, _) = try! SMPFamilyTests.package()
        let settings = upgrade.map { [SMPFamily.upgradeSetting: $0] } ?? [:]
        return try await Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(SMPFamilyTests.request(package, device: device, settings: settings))
    }

    @Test(arguments: [(true, "IMG_MGMT_ERR_CURRENT_VERSION_IS_NEWER (27)"), (false, "MGMT_ERR_EBADSTATE (6)")])
    func anImageNotNewerIsRefusedBeforeTheErase(smpV2: Bool, says: String) async throws {
        for running in ["2.0.0", "3.1.0"] {
            let device = try Self.device(running: running, smpV2: smpV2)
            let before = await device.imageState()
            do {
                _ = try await Self.update(device, upgrade: "true")
                Issue.record("v\(smpV2 ? 2 : 1), running \(running): a 2.0.0 image went on with upgrade")
            } catch {
                // v2 names the refusal (already-present); v1's bare rc 6 is a refusal: exit 40 either way.
                #expect(error.code == (smpV2 ? .alreadyPresent : .remoteRefusal), "\(error)")
                #expect(error.message.contains(says), "\(error.message)")
                #expect(error.message.contains("upgrade"), "\(error.message)")
                #expect(!error.message.contains("\n"))
            }
            // Nothing erased or written: the slots are as they were, no upload under way.
            #expect(await device.imageState() == before)
            let state = await device.state()
            #expect(state.upload == nil && state.counters.uploadBytesWritten == 0, "\(state.counters)")
        }
    }

    /// A newer image goes on with `upgrade` (the request carried it: the device compared versions), and an older one
    /// goes on without the setting.
    @Test func newerWithUpgradeAndOlderWithout() async throws {
        let (_, image) = try SMPFamilyTests.package()
        let newer = try Self.device(running: "1.0.0")
        _ = try await Self.update(newer, upgrade: "true")
        #expect(await newer.imageState().active()?.hash == image.hashTLV)
        let older = try Self.device(running: "3.1.0")
        _ = try await Self.update(older, upgrade: nil)
        #expect(await older.imageState().active()?.hash == image.hashTLV)
        let explicit = try Self.device(running: "3.1.0")
        _ = try await Self.update(explicit, upgrade: "false")
        #expect(await explicit.imageState().active()?.hash == image.hashTLV)
    }

    /// A value other than true/false is refused by the plan, before anything connects.
    @Test func aBadValueIsAnInvalidOption() throws {
        let (package, _) = try SMPFamilyTests.package()
        do {
            _ = try SMPFamily().plan(package, options: UpdateOptions(settings: [SMPFamily.upgradeSetting: "yes"]))
            Issue.record("smp.upgrade=yes was taken")
        } catch {
            #expect(error.code == .invalidOption)
            #expect(error.message == "smp.upgrade=yes: expected true or false", "\(error.message)")
        }
    }
}
