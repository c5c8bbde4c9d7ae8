import BLECore
import BledfuTestSupport
import DFUPackage
import DFUSimulator
import Foundation
import LegacyDFU
import Testing

@Suite(.timeLimit(.minutes(10))) struct CorpusFlashTests {
    /// Every Legacy package of the corpus goes onto a virtual device of its kind over SEQPACKET pairs (application
    /// first, buttonless jump, every part in its own bootloader session) and must end byte for byte on it: the
    /// engine's own loop (the shipped updater's run of the same packages: BledfuKitTests' LegacyCorpusUpdaterTests).
    @Test(.enabled(if: LegacyCorpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func everyLegacyPackageOfTheCorpus() async throws {
        let packages = try LegacyCorpus.legacyPackages()
        #expect(packages.count == 16)
        var flashed = 0
        for (name, _, package) in packages {
            for (profile, parts) in try LegacyCorpus.plan(name, package) {
                let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
                var harness = LegacyHarness(device: device)
                do {
                    try await harness.update(parts)
                } catch {
                    Issue.record("\(name) on \(profile.kind) \(profile.chip): \(error)")
                    continue
                }
                let state = await device.state()
                for part in parts {
                    #expect(LegacyEndToEnd.holds(state, part), "\(name) \(part.name): \(state.installed)")
                }
                #expect(harness.misplaced.isEmpty, "\(name): \(harness.misplaced)")
                #expect(harness.journal.restarts.isEmpty, "\(name): \(harness.journal.restarts)")
            }
            flashed += 1
        }
        #expect(flashed == packages.count)
    }
}

/// The Legacy samples in Firmware/samples go onto their Firmware/*.json profiles (application first, jump, every
/// part) and end byte for byte on them.
@Suite(.timeLimit(.minutes(10))) struct LegacySampleTests {
    @Test(arguments: [
        ("sdk11-nrf51-app-v2.zip", "sdk11-nrf51"), ("sdk11-nrf52-sd-bl-app.zip", "sdk11-nrf52"),
        ("adafruit-feather52832-app-v2.zip", "adafruit-feather52832"), ("pinetime-app-v2.zip", "pinetime"),
    ])
    func sampleOnItsProfile(sample: String, profileName: String) async throws {
        let firmware = LegacyProfileFileTests.firmware
        let package = try FirmwarePackage(contentsOf: firmware.appendingPathComponent("samples/\(sample)"))
        var profile = try JSONDecoder().decode(
            LegacyDeviceProfile.self, from: try Data(contentsOf: firmware.appendingPathComponent("\(profileName).json")))
        profile.speedup = .infinity
        let parts = try LegacyPart.parts(of: package)
        let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        var harness = LegacyHarness(device: device)
        try await harness.update(parts)
        let state = await device.state()
        for part in parts { #expect(LegacyEndToEnd.holds(state, part), "\(sample) \(part.name)") }
        #expect(state.mode == .application)
        #expect(harness.misplaced.isEmpty, "\(harness.misplaced)")
        if parts.count == 2 { #expect(state.softdeviceFWID == 0x81) }  // read from the new SoftDevice's info structure
    }
}
