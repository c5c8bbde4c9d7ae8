import BLECore
import DFUPackage
import DFUSimulator
import GATT
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
}

/// A `DFUTransport` that counts Packet writes and bytes.
final class CountingTransport: DFUTransport {
    let base: GATTDFUTransport
    let counters: Mutex<(packets: Int, bytes: Int)>

    init(base: GATTDFUTransport, packetsBefore: Int) {
        self.base = base
        counters = Mutex((packetsBefore, 0))
    }

    var controlPointNotifications: AsyncStream<[UInt8]> { base.controlPointNotifications }
    var mtu: Int { get async { await base.mtu } }

    func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError) {
        try await base.writeControlPoint(bytes)
    }

    func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError) {
        counters.withLock { counters in
            counters.packets += 1
            counters.bytes += bytes.count
        }
        try await base.writePacket(bytes)
    }

    func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(DFUTransportError) {
        counters.withLock { counters in
            counters.packets += packets.count
            counters.bytes += packets.reduce(0) { $0 + $1.count }
        }
        try await base.writePackets(packets)
    }

    var peerFault: DFUTransportError? { get async { await base.peerFault } }
}

/// One upload of the campaign in this process (runs without a kill; ``ProcessKillRun`` does those): a fresh virtual
/// device with the run's faults, attempts until the image is verified or `maxAttempts` is reached, each attempt a
/// new connection and a new driver that resumes from the journal.
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
                installed: InstalledImages(application: nil, bootloader: InstalledImage(version: 1), softdevice: nil),
                link: LinkParameters(receiveBuffers: 64),
                flash: FlashParameters(queueDepth: 64, bankSize: 200_704),
                // A full flash queue needs flash time to be full for: real times, 100 times faster.
                speedup: plan.kinds.contains(.flashBusy) ? 100 : .infinity)
        }
    }

    func part() -> DFUPart {
        var random = CampaignRandom(state: plan.seed)
        let image = (0..<plan.imageSize).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let command = InitCommand(
            fwVersion: 2, hwVersion: 52, sdReq: [0xB7], type: .application, sdSize: 0, blSize: 0,
            appSize: UInt32(image.count),
            hash: ImageHash(type: .sha256, bytes: Array(DFUSimulatorDigest.sha256(image).reversed())), isDebug: false,
            bootValidation: [BootValidation(type: .crc)])
        return DFUPart(
            name: "application", initPacket: SecureInitPacket(command: command).encode(), image: image,
            firmwareVersion: 2)
    }

    func run() async -> RunReport {
        var report = RunReport(
            plan: plan, verdict: .violation, attempts: 0, interruptions: 0, bytesWritten: 0, bytesResent: 0,
            faultsFired: [], errors: [], note: "")
        guard let profile = profile() else { return report }
        let part = part()
        let expected = DFUSimulatorDigest.sha256Hex(part.image)
        let device = VirtualDevice(profile: profile, faults: plan.faults, clock: ContinuousClock())
        let store = InMemoryJournalStore()
        let journal = DFUJournal(deviceAddress: "C0:11:22:33:44:FF", packageSHA256: expected)
        var packets = 0
        var succeeded = false
        while report.attempts < maxAttempts, !succeeded {
            report.attempts += 1
            let attempt = await attempt(
                device: device, part: part, store: store, journal: journal, packetsBefore: packets)
            packets = attempt.packets
            report.bytesWritten += attempt.bytes
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
            let next = await attempt(device: restored, part: part, store: store, journal: journal, packetsBefore: 0)
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
    }

    /// One connection: MTU exchange, discovery, one driver run from the stored journal.
    func attempt(
        device: VirtualDevice, part: DFUPart, store: InMemoryJournalStore, journal: DFUJournal, packetsBefore: Int
    ) async -> Attempt {
        let (clientEnd, deviceEnd) = InMemoryBearer.makePair(capacity: 64, observer: observer)
        let serving = Task { await device.serve(deviceEnd) }
        let att = ATTClient(bearer: clientEnd, transactionTimeout: .seconds(5))
        defer { serving.cancel() }
        let gatt = GATTClient(att: att)
        let base: GATTDFUTransport
        do {
            _ = try await att.exchangeMTU(plan.mtu)
            base = try await GATTDFUTransport.open(client: gatt)
        } catch {
            await att.close()
            await serving.value
            return Attempt(result: .failure("connect: \(error)"), packets: packetsBefore, bytes: 0)
        }
        let transport = CountingTransport(base: base, packetsBefore: packetsBefore)
        let configuration = SecureDFUConfiguration(
            pacing: (try? PacingPolicies.parse(plan.pacing)) ?? AdaptivePacing(), maxAttempts: 3,
            checkpointTimeout: checkpointTimeout)
        let driver = SecureDFUDriver(
            transport: transport, clock: ContinuousClock(), configuration: configuration, journalStore: store)
        let stored = try? await store.load(deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256)
        let result: AttemptResult
        do {
            try await driver.run(part: part, journal: stored ?? journal)
            result = .success
        } catch {
            result = .failure("\(error)")
        }
        // The attempt ends: the link goes down.
        await att.close()
        await serving.value
        let counted = transport.counters.withLock { $0 }
        return Attempt(result: result, packets: counted.packets, bytes: counted.bytes)
    }
}
