import BLECore
import DFUCore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Foundation
import SecureDFU
import Testing

/// Issue 5 item 11, packages: every sample on both reference profiles, every Secure package of the corpus that
/// fits a virtual profile. In-process (socketpairs, ``Campaign``).
@Suite(.timeLimit(.minutes(5))) struct CampaignPackageTests {
    static let samples: [(package: String, target: String)] = [
        ("bracelet-app-v1.zip", "bracelet"), ("bracelet-app-v2.zip", "bracelet"), ("bracelet-sd-bl-v2.zip", "bracelet"),
        ("sensor-app-v1.zip", "sensor"), ("sensor-app-v2.zip", "sensor"),
    ]

    /// On its target profile a sample installs byte for byte; on the other one it is refused by name (hardware
    /// version) before the jump and nothing is installed.
    @Test(arguments: ["bracelet", "sensor"])
    func everySampleOnAReferenceProfile(profile name: String) async throws {
        let samples = Self.samples
        let outcomes = try await Campaign.concurrently(samples.count) { index in
            let device = VirtualDevice(profile: try Campaign.profile(name), clock: ContinuousClock())
            return try await Campaign.flash(try Campaign.source("Firmware/samples/\(samples[index].package)"), on: device)
        }
        let original = try Campaign.profile(name).installed
        for (sample, outcome) in zip(samples, outcomes) {
            let package = try Campaign.package("Firmware/samples/\(sample.package)")
            if sample.target == name {
                #expect(outcome.succeeded, "\(sample.package) on \(name): \(outcome)")
                let holds = Campaign.holds(package, outcome)
                #expect(holds, "\(sample.package) on \(name): \(outcome)")
                #expect(outcome.disconnects == 0)
                // A SoftDevice update without an application leaves the bootloader waiting for one
                // (nrf_bootloader_fw_activation.c: ACTIVATION_SUCCESS_EXPECT_ADDITIONAL_UPDATE).
                let waits = package.part(.application) == nil && package.part(.softdeviceBootloader) != nil
                #expect(outcome.state?.mode == (waits ? .bootloader : .application))
            } else {
                // Refused before the jump from the Hardware Revision: still in its application, nothing installed.
                #expect(outcome.failure?.code == .deviceMismatch, "\(sample.package) on \(name): \(outcome)")
                #expect(outcome.failure?.message.contains("hardware version") == true, "\(outcome)")
                #expect(outcome.state?.installed == original)
                #expect(outcome.state?.mode == .application)
            }
        }
    }

    /// The corpus of public Nordic packages (../shared/corpus/nordic-dfu-packages): every Secure DFU package whose
    /// init packets name an nRF52 hardware version goes onto a virtual device made to fit it (hardware version,
    /// SoftDevice FWID, no signature keys since the packages' keys are Nordic's), and must end byte for byte on it.
    @Test(.enabled(if: CorpusFixture.available, "../shared/corpus/nordic-dfu-packages is absent: corpus not flashed"))
    func everyFittingSecurePackageOfTheCorpus() async throws {
        var skipped: [String] = []
        var jobs: [(name: String, profile: DeviceProfile, parts: [PackagePart], source: PackageSource)] = []
        for (name, package) in CorpusFixture.securePackages() {
            guard let plan = CorpusFixture.plan(package) else {
                skipped.append(name)
                continue
            }
            // A device per part when no one device takes them all: that part alone, as a package of its own.
            jobs += try plan.map { (name, $0.0, $0.1, try Campaign.source(package, keeping: $0.1, name: name)) }
        }
        let fixed = jobs
        let outcomes = try await Campaign.concurrently(fixed.count, width: 8) { index in
            let device = VirtualDevice(profile: fixed[index].profile, clock: ContinuousClock())
            return try await Campaign.flash(fixed[index].source, on: device)
        }
        for (job, outcome) in zip(jobs, outcomes) {
            #expect(outcome.succeeded, "\(job.name): \(outcome)")
            let ok = job.parts.allSatisfy { part in
                Campaign.expectedImages(part).allSatisfy { Campaign.installed(outcome.state, slot: $0.slot) == $0.sha256 }
            }
            #expect(ok, "\(job.name): images differ: \(String(describing: outcome.state?.installed))")
        }
        let flashed = Set(jobs.map(\.name)).count
        if !skipped.isEmpty { print("corpus: \(skipped.count) Secure package(s) fit no virtual profile: \(skipped)") }
        print("corpus: \(flashed) Secure package(s) flashed")
        #expect(flashed >= 10, "only \(flashed) corpus packages were flashed")
    }
}

/// The public package corpus, read-only.
enum CorpusFixture {
    static var directory: URL {
        if let path = ProcessInfo.processInfo.environment["BLEDFU_CORPUS"], !path.isEmpty { return URL(fileURLWithPath: path) }
        return CLIRunner.repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/corpus/nordic-dfu-packages")
    }

    /// The corpus is there, or CI (`CI=true`) demands it: then a missing corpus fails the test instead of skipping it.
    static var available: Bool {
        FileManager.default.fileExists(atPath: directory.path) || ProcessInfo.processInfo.environment["CI"] == "true"
    }

    /// Secure DFU packages (every part has a protobuf init packet), one per distinct file content, by name.
    static func securePackages() -> [(String, FirmwarePackage)] {
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else { return [] }
        var seen = Set<Data>()
        var found: [(String, FirmwarePackage)] = []
        for case let path as String in walker where path.hasSuffix(".zip") {
            let url = directory.appendingPathComponent(path)
            guard let data = try? Data(contentsOf: url), seen.insert(data).inserted,
                let package = try? FirmwarePackage(data: data), !package.parts.isEmpty,
                package.parts.allSatisfy({ $0.initCommand != nil })
            else { continue }
            found.append((path, package))
        }
        return found.sorted { $0.0 < $1.0 }
    }

    /// The device(s) to flash `package` on: one device for the whole package when one SoftDevice FWID satisfies
    /// every part (the simulator keeps its FWID across a SoftDevice update), else one device per part. Nil when a
    /// part targets no nRF52 profile (hardware version other than 52 / 52840) or cannot fit its flash.
    static func plan(_ package: FirmwarePackage) -> [(DeviceProfile, [PackagePart])]? {
        let parts = package.parts.filter { $0.kind != .application } + package.parts.filter { $0.kind == .application }
        var profiles: [DeviceProfile] = []
        for part in parts {
            guard let profile = fit(part) else { return nil }
            profiles.append(profile)
        }
        guard var first = profiles.first else { return nil }
        let shared = parts.reduce(Set(requirements(parts[0]))) { $0.intersection(requirements($1)) }
        if let fwid = shared.min() {
            first.softDeviceFWID = fwid
            first.flash.bankSize = profiles.map(\.flash.bankSize).max() ?? first.flash.bankSize
            return [(first, parts)]
        }
        return zip(profiles, parts).map { ($0, [$1]) }
    }

    /// FWIDs a part accepts (0x0000 "no SoftDevice" and 0xFFFE "any" excluded).
    static func requirements(_ part: PackagePart) -> [UInt16] {
        (part.initCommand?.sdReq ?? []).filter { $0 != 0 && $0 != 0xFFFE && $0 <= 0xFFFF }.map { UInt16($0) }
    }

    static func fit(_ part: PackagePart) -> DeviceProfile? {
        guard let command = part.initCommand else { return nil }
        let base: String
        switch command.hwVersion {
        case 52?: base = "bracelet"
        case 52840?: base = "sensor"
        case nil where command.isDebug == true: base = "bracelet"
        default: return nil
        }
        guard var profile = try? Campaign.profile(base) else { return nil }
        if (command.blSize ?? 0) > UInt32(DeviceProfile.bootloaderMaxSize) { return nil }
        profile.publicKeys = []
        profile.hwVersion = command.hwVersion ?? profile.hwVersion
        if let fwid = requirements(part).first { profile.softDeviceFWID = fwid }
        profile.installed = InstalledImages(
            application: InstalledImage(version: 0), bootloader: InstalledImage(version: 0), softdevice: nil)
        profile.flash.bankSize = max(profile.flash.bankSize, (part.image.count + 4095) / 4096 * 4096)
        return profile
    }
}
