import BLECore
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUSimulator
import Foundation
import LegacyDFU
import Testing

@testable import BledfuKit

/// Issue 15 §7 through the shipped updater: every Legacy package of the real corpus, as its zip file, goes through
/// `Updater` (detection, the buttonless jump, the family's part loop, the journal) onto a virtual device of its kind,
/// and every part ends byte for byte on the device, in the package's order (SoftDevice and bootloader first).
@Suite(.timeLimit(.minutes(10))) struct LegacyCorpusUpdaterTests {
    @Test(.enabled(if: LegacyCorpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func everyLegacyPackageThroughTheUpdater() async throws {
        let packages = try LegacyCorpus.legacyPackages()
        #expect(packages.count == 16)
        var throughUpdater = 0
        var perPart: [String] = []
        for (name, bytes, package) in packages {
            let plan = try LegacyCorpus.plan(name, package)
            guard plan.count == 1, let (profile, parts) = plan.first else {
                // Parts for two protocols (an SDK 8+ bootloader that installs SDK 6.1): no single device takes it.
                perPart.append(name)
                continue
            }
            let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
            var request = UpdateRequest(
                package: PackageSource(fileName: (name as NSString).lastPathComponent, bytes: bytes, sha256: DFUSimulatorDigest.sha256Hex(bytes)),
                target: .address(PeerAddress(LegacyCorpus.address, type: profile.addressType)),
                options: UpdateOptions(pacing: "adaptive", rebootDelay: .zero), reconnect: ReconnectPolicy(initialDelay: .zero))
            request.family = nil
            let run = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock()).start(request)
            var completed: [String] = []
            var warnings: [String] = []
            for await event in run {
                switch event {
                case .partCompleted(_, let partName): completed.append(partName)
                case .warning(let text): warnings.append(text)
                default: break
                }
            }
            do {
                let result = try await run.result()
                #expect(result.family == .legacy, "\(name)")
                #expect(result.statistics.bytesResent == 0, "\(name): \(warnings)")
            } catch {
                Issue.record("\(name) on \(profile.kind) \(profile.chip): \(error)")
                continue
            }
            let state = await device.state()
            for part in parts { #expect(LegacyCorpus.holds(state, part), "\(name) \(part.name): \(state.installed)") }
            #expect(completed == parts.map(\.name), "\(name): parts completed \(completed)")
            throughUpdater += 1
        }
        // Only packages whose parts need two different bootloaders are left to the engine's test (CorpusFlashTests).
        #expect(throughUpdater + perPart.count == packages.count)
        #expect(perPart.count <= 2, "\(perPart)")
    }
}
