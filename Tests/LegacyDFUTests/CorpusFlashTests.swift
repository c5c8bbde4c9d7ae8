import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import LegacyDFU
import Testing

/// The real public packages in `<repo>/../shared/corpus/nordic-dfu-packages` (or `$BLEDFU_CORPUS`). Without the
/// corpus the test is skipped, visibly; under `CI=true` it runs and fails.
enum LegacyCorpus {
    static let root: URL = {
        if let path = ProcessInfo.processInfo.environment["BLEDFU_CORPUS"], !path.isEmpty {
            return URL(fileURLWithPath: path).standardized
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/corpus/nordic-dfu-packages").standardized
    }()

    static var isPresent: Bool { FileManager.default.fileExists(atPath: root.appendingPathComponent("expected-decodes.json").path) }
    static var shouldRun: Bool { isPresent || ProcessInfo.processInfo.environment["CI"] == "true" }

    /// The Legacy packages as `expected-decodes.json` lists them (an image whose init packet is "legacy").
    static func legacyPackages() throws -> [(name: String, package: FirmwarePackage)] {
        let data = try Data(contentsOf: root.appendingPathComponent("expected-decodes.json"))
        let records = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        var out: [(String, FirmwarePackage)] = []
        for record in records {
            let images = record["images"] as? [[String: Any]] ?? []
            guard images.contains(where: { ($0["init_packet"] as? [String: Any])?["format"] as? String == "legacy" }) else { continue }
            let path = try #require(record["package"] as? String)
            let relative = path.hasPrefix("public/") ? String(path.dropFirst("public/".count)) : path
            out.append((relative, try FirmwarePackage(contentsOf: root.appendingPathComponent(relative))))
        }
        return out
    }

    /// SoftDevices by FWID: where the application starts after them (`SD_SIZE_GET`).
    static let softdeviceEnd: [UInt16: Int] = [0x64: 0x18000, 0x80: 0x1B000, 0x81: 0x1C000]

    /// The device(s) that fit a package: a device of the package's own kind and time, one for the whole package
    /// when one fits every part, else one per part (IOS-DFU-Library's SDK 6.1 set moves an SDK 8+ bootloader to
    /// SDK 6.1 with its first part, so its application needs the older protocol).
    static func plan(_ name: String, _ package: FirmwarePackage) throws -> [(LegacyDeviceProfile, [LegacyPart])] {
        let parts = try LegacyPart.parts(of: package)
        let profiles = try zip(parts, package.parts).map { try fit(name, $1) }
        if Set(profiles.map(\.kind)).count == 1, Set(profiles.map(\.chip)).count == 1, var first = profiles.first {
            // The first part decides the installed SoftDevice; a SoftDevice update brings the one the next part needs.
            first.softDeviceFWID = profiles[0].softDeviceFWID
            return [(first, parts)]
        }
        return zip(profiles, parts).map { ($0, [$1]) }
    }

    static func fit(_ name: String, _ part: PackagePart) throws -> LegacyDeviceProfile {
        let legacy = try #require(part.legacyInit)
        let address = LegacyFixture.address
        var profile: LegacyDeviceProfile
        if legacy.layout == .crcOnly {
            profile = .sdk6NRF51(address: address)
        } else if legacy.deviceType == 0x0052 {
            profile = name.contains("52840") ? .adafruitNRF52840(address: address) : .adafruitNRF52832(address: address)
            // Before 352c44c (2018-08-09) every Adafruit bootloader used ADAFRUIT_DEV_REV 0xADAF.
            profile.deviceRevision = legacy.deviceRevision ?? profile.deviceRevision
            profile.dualBank = name.contains("_dual")
        } else if name.contains("s132") {
            profile = .sdk11NRF52(address: address)
        } else {
            profile = .sdk11NRF51(address: address)
            if let fwid = legacy.softdeviceReq.first(where: { $0 != 0xFFFE }), let end = softdeviceEnd[fwid] {
                profile.softDeviceFWID = fwid
                profile.applicationStart = end
                profile.sdkVersion = fwid == 0x64 ? "8.0.0" : profile.sdkVersion
            }
        }
        return LegacyFixture.instant(profile)
    }
}

@Suite struct CorpusFlashTests {
    /// Every Legacy package of the corpus goes onto a virtual device of its kind over SEQPACKET pairs (application
    /// first, buttonless jump, every part in its own bootloader session) and must end byte for byte on it.
    @Test(.enabled(if: LegacyCorpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func everyLegacyPackageOfTheCorpus() async throws {
        let packages = try LegacyCorpus.legacyPackages()
        #expect(packages.count == 16)
        var flashed = 0
        for (name, package) in packages {
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
@Suite struct LegacySampleTests {
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
