import BLECore
import DFUPackage
import DFUSimulator
import GATT
import SecureDFU

/// Secure DFU's part of the bench: one transfer to a fresh virtual Secure DFU device (``BenchLoop``), the engine as
/// `bledfu flash` runs it, measured against the protocol bound of the same link model (``LinkModel/protocolBound``).
public enum SecureBench {
    /// The modes `bench` runs on Secure DFU profiles by default.
    public static let defaultModes = ["adaptive", "ios", "android", "nrfutil", "seed-pacing", "with-response"]

    /// The Secure DFU modes among `requested` (nil: ``defaultModes``).
    public static func modes(_ requested: [String]?) -> [String] {
        (requested ?? defaultModes).filter { (try? PacingPolicies.parse($0)) != nil }
    }

    /// The device's profile made ready for repeated benchmark updates: no application installed (it boots into the
    /// bootloader), no signature required, a bank large enough for `imageBytes`.
    public static func benchProfile(_ profile: DeviceProfile, imageBytes: Int, speedup: Double) -> DeviceProfile {
        var copy = profile
        copy.installed.application = nil
        copy.publicKeys = []
        copy.requireSignedApp = false
        copy.saveProgress = false
        copy.flash.bankSize = max(copy.flash.bankSize, imageBytes)
        copy.speedup = speedup
        return copy
    }

    /// `size` pseudo-random bytes, the same bytes for a given size (SplitMix64 steps, one byte each).
    static func image(size: Int) -> [UInt8] {
        var random = SplitMix64(seed: 0x9E37_79B9_7F4A_7C15 ^ UInt64(size))
        return random.bytes(size)
    }

    /// An application part of `size` pseudo-random bytes with an unsigned init packet the profile accepts.
    public static func part(size: Int, profile: DeviceProfile) -> DFUPart {
        let image = image(size: size)
        let command = InitCommand(
            fwVersion: 2, hwVersion: profile.hwVersion, sdReq: [UInt32(profile.softDeviceFWID)], type: .application,
            sdSize: 0, blSize: 0, appSize: UInt32(size),
            hash: ImageHash(type: .sha256, bytes: Array(DFUSimulatorDigest.sha256(image).reversed())),
            isDebug: false, bootValidation: [BootValidation(type: .crc)])
        return DFUPart(
            name: "application", initPacket: SecureInitPacket(command: command).encode(), image: image,
            firmwareVersion: 2)
    }

    /// `--warm`: a first transfer (not timed into the result) teaches the adaptive mode the device; the timed
    /// transfer, to a fresh device of the same profile, starts from what it learned (``AdaptiveStreamPacing/init(resuming:tuning:)``),
    /// as the next connection to a device of the same hardware and bootloader does. Other modes learn nothing: run cold.
    static func runWarm(
        mode: String, profileName: String, profile: DeviceProfile, part: DFUPart, repetition: Int,
        checkpointTimeout: Duration, trace: (@Sendable (String) -> Void)? = nil
    ) async -> BenchRun {
        var learned: AdaptiveStreamPacing.Snapshot?
        if (try? PacingPolicies.parse(mode)) is AdaptiveStreamPacing {
            _ = await run(
                mode: mode, profileName: profileName, profile: profile, part: part, repetition: repetition,
                checkpointTimeout: checkpointTimeout, learned: &learned)
        }
        return await run(
            mode: mode, profileName: profileName, profile: profile, part: part, repetition: repetition,
            checkpointTimeout: checkpointTimeout, trace: trace, seed: learned, learned: &learned)
    }

    /// One transfer of `part` with `mode` to a fresh virtual device made from `profile` (already prepared).
    static func run(
        mode: String, profileName: String, profile: DeviceProfile, part: DFUPart, repetition: Int,
        checkpointTimeout: Duration, trace: (@Sendable (String) -> Void)? = nil
    ) async -> BenchRun {
        var learned: AdaptiveStreamPacing.Snapshot?
        return await run(
            mode: mode, profileName: profileName, profile: profile, part: part, repetition: repetition,
            checkpointTimeout: checkpointTimeout, trace: trace, seed: nil, learned: &learned)
    }

    /// One transfer; an adaptive mode starts from `seed` when given, and leaves what it learned in `learned`.
    static func run(
        mode: String, profileName: String, profile: DeviceProfile, part: DFUPart, repetition: Int,
        checkpointTimeout: Duration, trace: (@Sendable (String) -> Void)? = nil, seed: AdaptiveStreamPacing.Snapshot? = nil,
        learned: inout AdaptiveStreamPacing.Snapshot?
    ) async -> BenchRun {
        var run = BenchRun(mode: mode, profile: profileName, imageBytes: part.image.count, repetition: repetition)
        var pacing: any PacingPolicy
        do {
            pacing = try PacingPolicies.parse(mode)
        } catch {
            run.error = error.description
            return run
        }
        if let seed, let adaptive = pacing as? AdaptiveStreamPacing {
            pacing = AdaptiveStreamPacing(resuming: seed, tuning: adaptive.tuning)
        }
        let device = VirtualDevice(profile: profile, clock: ContinuousClock())
        let counts = CountingTransport.Box()
        let configuration = SecureDFUConfiguration(pacing: pacing, checkpointTimeout: checkpointTimeout)
        var failureCode: DFUEngineError.Code?
        var policy: (any PacingPolicy)?
        do throws(BenchSetupError) {
            // A bonded bootloader's DFU characteristics need an encrypted link: the GATT client raises it when refused.
            (failureCode, policy) = try await BenchLoop.connect(
                to: device, secure: true, wrap: { CheckpointCountingBearer($0, box: counts) }
            ) {
                link in
                await transfer(part, on: link.att, profile: profile, configuration: configuration, counts: counts, run: &run, trace: trace)
            }
        } catch {
            run.error = error.reason
            return run
        }
        learned = (policy as? AdaptiveStreamPacing)?.snapshot
        let state = await device.state()
        run.packetsDropped = Int(clamping: state.counters.packetsDropped)
        run.imageCorrect = state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(part.image)
        if !run.completed, run.imageCorrect, failureCode == .executeUnconfirmed {
            // The device reset before its Execute response went out; `bledfu flash` confirms by finding the new
            // application, the bench by reading what the device installed.
            run.finish(seconds: run.seconds, completed: true)
            run.error = "last Execute unconfirmed by the device; installed image verified"
        }
        return run
    }

    /// The transfer on one connection: MTU, the model's figures at that MTU, the engine's run timed. Returns the
    /// engine's failure code (nil when it succeeded) and the pacing as the transfer left it.
    static func transfer(
        _ part: DFUPart, on att: ATTClient, profile: DeviceProfile, configuration: SecureDFUConfiguration,
        counts: CountingTransport.Box, run: inout BenchRun, trace: (@Sendable (String) -> Void)?
    ) async -> (DFUEngineError.Code?, (any PacingPolicy)?) {
        do {
            run.mtu = try await att.exchangeMTU()
            let link = LinkModel(profile: profile)
            let scale = BenchLoop.scale(profile.speedup)
            let ceiling = link.ceiling(mtu: run.mtu)
            run.ceilingBytesPerSecond = ceiling.writeWithoutResponse * scale
            run.airBytesPerSecond = ceiling.airWriteWithoutResponse * scale
            run.flashBytesPerSecond = ceiling.flash * scale
            run.protocolBoundBytesPerSecond =
                link.protocolBound(mtu: run.mtu, objectSize: profile.dataObjectMaxSize) * scale
            let transport = CountingTransport(
                try await GATTDFUTransport.open(client: GATTClient(att: att)), box: counts)
            let driver = SecureDFUDriver(transport: transport, clock: ContinuousClock(), configuration: configuration)
            let label = "\(run.mode) \(run.profile)"
            let reports = Task { await lastReport(driver.progress, label: label, trace: trace) }
            let (failure, seconds) = await BenchLoop.timed { () async -> DFUEngineError? in
                do throws(DFUEngineError) {
                    try await driver.run(part: part)
                    return nil
                } catch {
                    return error
                }
            }
            await driver.finish()
            let last = await reports.value
            run.finish(seconds: seconds, completed: failure == nil)
            run.error = failure.map { "\($0)" }
            let counted = transport.counts
            run.bytesResent = max(0, counted.packetBytes - part.image.count - part.initPacket.count)
            run.checkpoints = counted.checkpointReports
            run.checksumRequests = counted.checksumRequests
            run.failedCheckpoints = last?.progress.retries ?? 0
            return (failure?.code, await driver.learnedPacing)
        } catch {
            run.error = "\(error)"
            return (nil, nil)
        }
    }

    /// The engine's last progress report, each one traced when asked (`BLEDFU_BENCH_TRACE=1` in the CLI).
    static func lastReport(
        _ progress: AsyncStream<DFUProgressReport>, label: String, trace: (@Sendable (String) -> Void)?
    ) async -> DFUProgressReport? {
        var last: DFUProgressReport?
        let clock = ContinuousClock()
        let origin = clock.now
        for await report in progress {
            if let trace {
                let at = origin.duration(to: clock.now)
                let p = report.progress
                trace("trace \(label) \(at): \(p.bytesConfirmed) retries \(p.retries) resent \(p.bytesResent)")
            }
            last = report
        }
        return last
    }
}
