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
/// and every part ends byte for byte on the device, in the package's order (SoftDevice and bootloader first). A
/// package whose parts need two different bootloaders (IOS-DFU-Library's SDK 6.1 set: its first part moves an SDK 8+
/// bootloader to SDK 6.1) goes part by part, each part as a package of its own onto a device of its kind.
@Suite(.timeLimit(.minutes(10))) struct LegacyCorpusUpdaterTests {
    /// One update of `bytes` onto `device`; the names of the parts completed, or the error.
    static func update(_ device: VirtualLegacyDevice, _ bytes: [UInt8], name: String, addressType: AddressType) async
        -> (completed: [String], warnings: [String], result: Result<UpdateResult, DFUError>)
    {
        let request = UpdateRequest(
            package: SyntheticPackage.source(bytes, fileName: (name as NSString).lastPathComponent),
            target: .address(PeerAddress(LegacyCorpus.address, type: addressType)),
            options: UpdateOptions(pacing: "adaptive", rebootDelay: .zero), reconnect: ReconnectPolicy(initialDelay: .zero))
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
            return (completed, warnings, .success(try await run.result()))
        } catch {
            return (completed, warnings, .failure(error))
        }
    }

    @Test(.enabled(if: LegacyCorpus.shouldRun, "the package corpus is absent (set BLEDFU_CORPUS)"))
    func everyLegacyPackageThroughTheUpdater() async throws {
        let packages = try LegacyCorpus.legacyPackages()
        #expect(packages.count == 16)
        var flashed = 0
        var perPart: [String] = []
        for (name, bytes, package) in packages {
            let plan = try LegacyCorpus.plan(name, package)
            if plan.count > 1 { perPart.append(name) }
            var ok = true
            for (index, (profile, parts)) in plan.enumerated() {
                // One device for the whole package, or one per part (then the part alone, as its own package).
                let zip = plan.count == 1 ? bytes : try package.archive(keeping: [package.parts[index].kind])
                let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
                let (completed, warnings, outcome) = await Self.update(device, zip, name: name, addressType: profile.addressType)
                do {
                    let result = try outcome.get()
                    #expect(result.family == .legacy, "\(name)")
                    #expect(result.statistics.bytesResent == 0, "\(name): \(warnings)")
                } catch {
                    Issue.record("\(name) on \(profile.kind) \(profile.chip): \(error)")
                    ok = false
                    continue
                }
                let state = await device.state()
                for part in parts { #expect(LegacyCorpus.holds(state, part), "\(name) \(part.name): \(state.installed)") }
                #expect(completed == parts.map(\.name), "\(name): parts completed \(completed)")
            }
            if ok { flashed += 1 }
        }
        #expect(flashed == packages.count)
        #expect(perPart.count <= 2, "\(perPart)")
    }
}
