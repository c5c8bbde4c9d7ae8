import BLECore
import BledfuKit
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUSimulator
import GATT
import LinuxIO
import SecureDFU
import Synchronization

/// How one upload ended.
enum RunVerdict: String {
    /// The device installed the image and its SHA-256 matches.
    case verified
    /// Every attempt failed with a clear error, and a later attempt on the device as it was left (restored without
    /// faults) completes: resumable.
    case clearErrorResumable = "clear-error-resumable"
    /// A violation: a wrong image accepted or installed, success claimed without the image, an unclear error, or a
    /// device left unable to take the next attempt.
    case violation
}

struct RunReport {
    var plan: RunPlan
    var verdict: RunVerdict
    var attempts: Int
    /// Link interruptions (failed attempts) before the end.
    var interruptions: Int
    /// Packet bytes (init packet and firmware) written over all attempts.
    var bytesWritten: Int
    /// Bytes written beyond one copy of the init packet and the image.
    var bytesResent: Int
    var faultsFired: [String]
    var errors: [String]
    var note: String
    /// Attempts the engine reported as complete while the device had not installed the image.
    var falseSuccesses = 0
    /// The last attempt ended in an error, and the device had installed the image (checked on the device).
    var confirmedAfterLoss = false
    /// Ran through real processes (``ProcessKillRun``): `bledfu simulate` and killed `bledfu flash` children.
    var viaProcesses = false
    /// `bledfu` processes sent SIGKILL, and the device's Packet bytes at each kill.
    var killsFired = 0
    var killBytes: [Int] = []
    /// Every `bledfu flash` / `bledfu resume` process of the run, in order.
    var processes: [UploadProcessResult] = []
    /// Reconnects inside an attempt that found the device back in its old application and jumped again.
    var applicationReturns = 0
}

/// One upload of the campaign in this process (runs without a kill; ``ProcessKillRun`` does those): a fresh virtual
/// device with the run's faults, attempts until the image is verified or `maxAttempts` is reached, each attempt one
/// run of the library's ``Updater`` (the code `bledfu flash` runs) without reconnects of its own, resuming from the
/// journal the attempts share.
struct CampaignRun {
    let plan: RunPlan
    let maxAttempts: Int
    let checkpointTimeout: Duration
    /// Sees every PDU of every connection (for `--capture`).
    var observer: (any PDUObserver)? = nil

    static let address = BluetoothAddress("C0:11:22:33:44:FF")

    func profile() -> DeviceProfile? {
        Self.address.map {
            DeviceProfile(
                name: "Campaign", address: $0, saveProgress: plan.saveProgress, requireSignedApp: false,
                installed: InstalledImages(
                    application: plan.oldApplication ? InstalledImage(version: 1) : nil,
                    bootloader: InstalledImage(version: 1), softdevice: nil),
                link: LinkParameters(maxMTU: Int(plan.mtu), receiveBuffers: 64),
                flash: FlashParameters(queueDepth: 64, bankSize: 200_704),
                // A full flash queue needs flash time to be full for: real times, 100 times faster.
                speedup: plan.kinds.contains(.flashBusy) ? 100 : .infinity)
        }
    }

    /// The run's image: `imageSize` pseudo-random bytes from the run's seed.
    func image() -> [UInt8] { SyntheticPackage.image(plan.imageSize, seed: plan.seed) }

    func run() async -> RunReport {
        var report = RunReport(
            plan: plan, verdict: .violation, attempts: 0, interruptions: 0, bytesWritten: 0, bytesResent: 0,
            faultsFired: [], errors: [], note: "")
        guard let profile = profile() else { return report }
        // The part as the package carries it (the builder pads the image to whole words, as nrfutil does).
        guard let package = package(), let packaged = try? FirmwarePackage(bytes: package.bytes).parts.first else {
            report.note = "cannot build the run's package"
            return report
        }
        let part = DFUPart(packaged)
        let expected = DFUSimulatorDigest.sha256Hex(part.image)
        let device = VirtualDevice(profile: profile, faults: plan.faults, clock: ContinuousClock())
        let store = InMemoryUpdateJournalStore()
        var packets = 0
        var succeeded = false
        while report.attempts < maxAttempts, !succeeded {
            report.attempts += 1
            let attempt = await attempt(device: device, package: package, store: store, packetsBefore: packets)
            packets = attempt.packets
            report.bytesWritten += attempt.bytes
            report.applicationReturns += max(0, attempt.jumps - 1)
            switch attempt.result {
            case .success:
                // Check the device as a careful host would after a reported success; a success without the image
                // is a violation, and the next attempt goes on (the device still holds the transfer).
                if await device.state().installed.application?.sha256 == expected {
                    succeeded = true
                } else {
                    report.falseSuccesses += 1
                    report.errors.append("engine reported success, the device has no valid image")
                }
            case .failure(let error):
                report.errors.append(error)
                // As bledfu does after an unconfirmed last Execute: look at the device; one that restarted into the
                // new application is done (and that link loss was the device's reset, not an interruption).
                if await device.state().installed.application?.sha256 == expected {
                    succeeded = true
                    report.confirmedAfterLoss = true
                } else {
                    report.interruptions += 1
                }
            }
        }
        let state = await device.state()
        report.faultsFired = state.faults.map(\.kind)
        report.bytesResent = max(0, report.bytesWritten - part.image.count - part.initPacket.count)
        let installed = state.installed.application?.sha256
        let unclear = report.errors.filter { $0.isEmpty || $0.contains("\n") }
        if let installed, installed != expected {
            report.note = "WRONG IMAGE installed: \(installed)"
        } else if report.falseSuccesses > 0 {
            report.note = "success reported \(report.falseSuccesses) time(s) without the image on the device"
                + (installed == expected ? " (a later attempt installed it)" : "")
        } else if !unclear.isEmpty {
            report.note = "unclear error: \(unclear)"
        } else if succeeded {
            report.verdict = .verified
        } else if installed == expected {
            report.verdict = .verified
            report.note = "image installed; the last attempt lost the link after the final Execute"
        } else {
            // Resumable: the device as it was left (flash, settings), without faults, takes the next attempt.
            let restored = VirtualDevice(
                profile: profile, clock: ContinuousClock(), restoring: await device.persistentState())
            let next = await attempt(device: restored, package: package, store: store, packetsBefore: 0)
            let after = await restored.state().installed.application?.sha256
            if after == expected {
                report.verdict = .clearErrorResumable
            } else {
                report.note = "device left unable to take the next attempt: \(next.result)"
            }
        }
        return report
    }

    enum AttemptResult {
        case success
        case failure(String)
    }

    struct Attempt {
        var result: AttemptResult
        var packets: Int
        var bytes: Int
        /// Buttonless jumps from the application: more than one in an attempt means a reconnect found the device
        /// back in its application (a power loss on a dual-bank device) and jumped again.
        var jumps = 0
    }

    /// The run's image as an unsigned application package (as `bledfu package create` makes it).
    func package() -> PackageSource? {
        guard let bytes = try? SyntheticPackage.secureApplication(image()) else { return nil }
        return SyntheticPackage.source(bytes, fileName: "app.zip")
    }

    /// One attempt: one run of the updater (one connection, or a second one to look at the device after an
    /// unacknowledged last Execute), resuming from the stored journal.
    func attempt(device: VirtualDevice, package: PackageSource, store: InMemoryUpdateJournalStore, packetsBefore: Int)
        async -> Attempt
    {
        let counter = PacketCounter(forwardingTo: observer)
        let adapter = VirtualDeviceAdapter(devices: [device], link: .inMemory)
        let updater = Updater(
            adapter: adapter, journal: store,
            wrapBearer: { bearer in CapturingBearer(wrapping: bearer, observers: [counter]) })
        let options = UpdateOptions(pacing: plan.pacing, responseTimeout: checkpointTimeout, rebootDelay: .zero)
        // With an old application the attempt reconnects itself (as `bledfu flash` does): after a power loss it has
        // to find the device in that application, at its own address, and jump again.
        let reconnect = plan.oldApplication
            ? ReconnectPolicy(attempts: 3, initialDelay: .milliseconds(20), maximumDelay: .milliseconds(80))
            : ReconnectPolicy(attempts: 0)
        let request = UpdateRequest(
            package: package, target: .address(PeerAddress(Self.address ?? device.profile.address, type: .random)),
            options: options, reconnect: reconnect, scanTimeout: .seconds(5), connectTimeout: .seconds(5))
        let run = updater.start(request)
        var jumps = 0
        for await event in run {
            if case .jumping = event { jumps += 1 }
        }
        let result: AttemptResult
        do {
            _ = try await run.result()
            result = .success
        } catch {
            result = .failure("\(error)")
        }
        // The attempt ends: the link goes down.
        await adapter.idle()
        let counted = counter.counts
        return Attempt(
            result: result, packets: packetsBefore + counted.packets, bytes: counted.initBytes + counted.dataBytes,
            jumps: jumps)
    }
}
