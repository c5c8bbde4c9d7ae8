import ATT
import BLECore
import BledfuKit
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Foundation
import GATT
import LinuxIO
import SecureDFU
import Synchronization
import Testing
import VirtualRadio

/// The result of one in-process update: the updater's outcome, link losses, bytes, the device afterwards.
struct CampaignOutcome: Sendable, CustomStringConvertible {
    var failure: DFUError?
    var disconnects = 0
    var counts = PacketCounter.Counts()
    var skippedParts: [String] = []
    var state: DeviceState?

    var succeeded: Bool { failure == nil }
    var description: String {
        "failure: \(failure.map { "\($0)" } ?? "none"), disconnects \(disconnects), data \(counts.dataBytes) B, "
            + "init \(counts.initBytes) B, skipped \(skippedParts), faults \(state?.faults.map(\.description) ?? [])"
    }
}

/// `bledfu flash` in-process: the library's ``Updater`` (the code `bledfu flash` runs) against a ``VirtualDevice``
/// served over real `socketpair(AF_UNIX, SOCK_SEQPACKET)` links (``VirtualDeviceAdapter``): the buttonless jump
/// when the device comes up in application mode, a reconnect after every lost link with the journal-based resume,
/// a system part refused as already present skipped. Deterministic for a fault plan; no wall-clock assertions.
enum Campaign {
    static let reference: [String: DeviceProfile] = {
        var profiles: [String: DeviceProfile] = [:]
        for name in ["bracelet", "sensor"] {
            let url = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/\(name).json")
            if let data = try? Data(contentsOf: url), let profile = try? JSONDecoder().decode(DeviceProfile.self, from: data) {
                profiles[name] = profile
            }
        }
        return profiles
    }()

    /// A reference profile with time taken out of the model (every modelled duration is zero).
    static func profile(_ name: String, saveProgress: Bool? = nil) throws -> DeviceProfile {
        var profile = try #require(reference[name], "Firmware/\(name).json missing or unreadable")
        profile.speedup = .infinity
        if let saveProgress { profile.saveProgress = saveProgress }
        return profile
    }

    static func package(_ path: String) throws -> FirmwarePackage {
        try FirmwarePackage(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent(path))
    }

    /// A package file as the updater reads it.
    static func source(_ path: String) throws -> PackageSource {
        let url = CLIRunner.repositoryRoot.appendingPathComponent(path)
        return PackageSource(fileName: url.lastPathComponent, bytes: Array(try Data(contentsOf: url)), sha256: "campaign")
    }

    /// Some parts of a package, as a package of their own (original `.bin` and `.dat` bytes).
    static func source(_ package: FirmwarePackage, keeping parts: [PackagePart], name: String) throws -> PackageSource {
        let bytes = try package.archive(keeping: Set(parts.map(\.kind)))
        return PackageSource(fileName: name, bytes: bytes, sha256: "campaign")
    }

    /// Runs the whole package against `device` with the shipped updater: the device's application address as the
    /// target (the updater finds a bootloader at address + 1 by itself), a reconnect policy without backoff (the
    /// episodes without progress are bounded as in `bledfu flash`), no reboot delay (the model resets at once).
    static func flash(
        _ package: PackageSource, on device: VirtualDevice, pacing: String = "adaptive", timeout: Duration = .seconds(5),
        reconnectAttempts: Int = 5
    ) async throws -> CampaignOutcome {
        var outcome = CampaignOutcome()
        let counter = PacketCounter()
        let adapter = VirtualDeviceAdapter(devices: [device])
        let updater = Updater(
            adapter: adapter, journal: InMemoryUpdateJournalStore(),
            wrapBearer: { bearer in CapturingBearer(wrapping: bearer, observers: [counter]) })
        let request = UpdateRequest(
            package: package, target: .address(PeerAddress(device.profile.address, type: .random)),
            options: UpdateOptions(pacing: pacing, responseTimeout: timeout, rebootDelay: .zero),
            reconnect: ReconnectPolicy(attempts: reconnectAttempts, initialDelay: .zero, maximumDelay: .zero),
            scanTimeout: .seconds(5), connectTimeout: .seconds(5))
        let run = updater.start(request)
        for await event in run {
            if case .partSkipped(_, let name, _) = event { outcome.skippedParts.append(name) }
        }
        do {
            _ = try await run.result()
        } catch {
            outcome.failure = error
        }
        await adapter.idle()
        outcome.disconnects = run.statistics.linkLosses
        outcome.counts = counter.counts
        outcome.state = await device.state()
        return outcome
    }

    /// Runs `count` jobs, at most `width` at a time (the links are latency-bound), results in job order.
    static func concurrently<T: Sendable>(
        _ count: Int, width: Int = 6, _ body: @escaping @Sendable (Int) async throws -> T
    ) async throws -> [T] {
        try await withThrowingTaskGroup(of: (Int, T).self) { group in
            var results = [T?](repeating: nil, count: count)
            var next = 0
            while next < min(width, count) {
                let index = next
                group.addTask { (index, try await body(index)) }
                next += 1
            }
            while let (index, value) = try await group.next() {
                results[index] = value
                if next < count {
                    let job = next
                    group.addTask { (job, try await body(job)) }
                    next += 1
                }
            }
            return results.compactMap { $0 }
        }
    }

    /// What the device must hold after `part` is installed: (installed slot, SHA-256) pairs.
    static func expectedImages(_ part: PackagePart) -> [(slot: String, sha256: String)] {
        switch part.firmwareType {
        case .application, .externalApplication: return [("application", DFUSimulatorDigest.sha256Hex(part.image))]
        case .softdevice: return [("softdevice", DFUSimulatorDigest.sha256Hex(part.image))]
        case .bootloader: return [("bootloader", DFUSimulatorDigest.sha256Hex(part.image))]
        default:
            let sdSize = Int(part.initCommand?.sdSize ?? part.manifestSDSize ?? 0)
            return [
                ("softdevice", DFUSimulatorDigest.sha256Hex(Array(part.image.prefix(sdSize)))),
                ("bootloader", DFUSimulatorDigest.sha256Hex(Array(part.image.dropFirst(sdSize)))),
            ]
        }
    }

    static func installed(_ state: DeviceState?, slot: String) -> String? {
        switch slot {
        case "application": state?.installed.application?.sha256
        case "softdevice": state?.installed.softdevice?.sha256
        default: state?.installed.bootloader.sha256
        }
    }

    /// Every image of `package` is on the device, byte for byte (by SHA-256).
    static func holds(_ package: FirmwarePackage, _ outcome: CampaignOutcome, skipping: [String] = []) -> Bool {
        package.parts.filter { !skipping.contains($0.kind.description) }.allSatisfy { part in
            expectedImages(part).allSatisfy { installed(outcome.state, slot: $0.slot) == $0.sha256 }
        }
    }
}

@Suite(.timeLimit(.minutes(5))) struct CampaignHarnessTests {
    /// The harness itself: a clean update over a socketpair installs the image, sends it once, needs no reconnect.
    @Test func cleanUpdateSendsEveryByteOnce() async throws {
        let package = try Campaign.package("Firmware/samples/bracelet-app-v2.zip")
        let device = VirtualDevice(profile: try Campaign.profile("bracelet"), clock: ContinuousClock())
        let outcome = try await Campaign.flash(try Campaign.source("Firmware/samples/bracelet-app-v2.zip"), on: device)
        #expect(outcome.succeeded, "\(outcome)")
        let holds = Campaign.holds(package, outcome)
        #expect(holds, "\(outcome)")
        #expect(outcome.disconnects == 0)
        #expect(outcome.counts.dataBytes == package.parts[0].image.count)
        #expect(outcome.counts.initBytes == package.parts[0].initPacketBytes.count)
        #expect(outcome.state?.mode == .application)
    }
}
