import ATT
import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import GATT
import LinuxIO
import SecureDFU
import VirtualRadio

/// Runs one benchmark transfer against an in-process virtual device over a real `socketpair(AF_UNIX,
/// SOCK_SEQPACKET)`: the device paces every PDU with its link model (divided by the profile's speedup; infinite
/// speedup removes all waits), the engine runs exactly as `bledfu flash` runs it.
enum BenchRunner {
    /// The device's profile made ready for repeated benchmark updates: no application installed (it boots into the
    /// bootloader), no signature required, a bank large enough for `imageBytes`.
    static func benchProfile(_ profile: DeviceProfile, imageBytes: Int, speedup: Double) -> DeviceProfile {
        var copy = profile
        copy.installed.application = nil
        copy.publicKeys = []
        copy.requireSignedApp = false
        copy.saveProgress = false
        copy.flash.bankSize = max(copy.flash.bankSize, imageBytes)
        copy.speedup = speedup
        return copy
    }

    /// An application part of `size` pseudo-random bytes (the same bytes for a given size) with an unsigned init
    /// packet the profile accepts.
    static func part(size: Int, profile: DeviceProfile) -> DFUPart {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(size)
        var image = [UInt8](repeating: 0, count: size)
        for index in image.indices {
            // SplitMix64 steps, one byte each: cheap and reproducible.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            image[index] = UInt8(truncatingIfNeeded: z ^ (z >> 31))
        }
        let command = InitCommand(
            fwVersion: 2, hwVersion: profile.hwVersion, sdReq: [UInt32(profile.softDeviceFWID)], type: .application,
            sdSize: 0, blSize: 0, appSize: UInt32(size),
            hash: ImageHash(type: .sha256, bytes: Array(DFUSimulatorDigest.sha256(image).reversed())),
            isDebug: false, bootValidation: [BootValidation(type: .crc)])
        return DFUPart(
            name: "application", initPacket: SecureInitPacket(command: command).encode(), image: image,
            firmwareVersion: 2)
    }

    /// One transfer of `part` with `mode` to a fresh virtual device made from `profile` (already prepared).
    static func run(
        mode: String, profileName: String, profile: DeviceProfile, part: DFUPart, repetition: Int,
        checkpointTimeout: Duration
    ) async -> BenchRun {
        let link = LinkModel(profile: profile)
        var run = BenchRun(
            mode: mode, profile: profileName, imageBytes: part.image.count, repetition: repetition, seconds: 0,
            bytesPerSecond: 0, ceilingBytesPerSecond: 0, airBytesPerSecond: 0, flashBytesPerSecond: 0,
            protocolBoundBytesPerSecond: 0, mtu: 0, bytesResent: 0, checkpoints: 0, checksumRequests: 0,
            failedCheckpoints: 0, packetsDropped: 0, completed: false, imageCorrect: false, error: nil)
        let pacing: any PacingPolicy
        do {
            pacing = try PacingPolicies.parse(mode)
        } catch {
            run.error = error.description
            return run
        }
        let device = VirtualDevice(profile: profile, clock: ContinuousClock())
        let deviceSide: SocketBearer
        let hostSide: SocketBearer
        do {
            (deviceSide, hostSide) = try SeqPacketBearer.makeSocketPair()
        } catch {
            run.error = "socketpair: \(error)"
            return run
        }
        let serving = Task {
            await device.serve(deviceSide)
            await deviceSide.close()
        }
        let counts = CountingTransport.Box()
        let att = ATTClient(bearer: CheckpointCountingBearer(hostSide, box: counts))
        defer { serving.cancel() }
        // The engine's typed failure code (`run.error` is the text for people).
        var failureCode: DFUEngineError.Code?
        do {
            run.mtu = try await att.exchangeMTU()
            // The model runs `speedup` times faster than real time; without a model there is no ceiling.
            let scale = profile.speedup.isFinite && profile.speedup > 0 ? profile.speedup : 0
            let ceiling = link.ceiling(mtu: run.mtu)
            run.ceilingBytesPerSecond = ceiling.writeWithoutResponse * scale
            run.airBytesPerSecond = ceiling.airWriteWithoutResponse * scale
            run.flashBytesPerSecond = ceiling.flash * scale
            run.protocolBoundBytesPerSecond =
                link.protocolBound(mtu: run.mtu, objectSize: profile.dataObjectMaxSize) * scale
            let transport = CountingTransport(
                try await GATTDFUTransport.open(client: GATTClient(att: att)), box: counts)
            let driver = SecureDFUDriver(
                transport: transport, clock: ContinuousClock(),
                configuration: SecureDFUConfiguration(pacing: pacing, checkpointTimeout: checkpointTimeout))
            let trace = ProcessInfo.processInfo.environment["BLEDFU_BENCH_TRACE"] == "1"
            let reports = Task {
                var last: DFUProgressReport?
                let clock = ContinuousClock()
                let origin = clock.now
                for await report in driver.progress {
                    if trace {
                        let at = origin.duration(to: clock.now)
                        Console.errorRaw("trace \(mode) \(profileName) \(at): \(report.progress.bytesConfirmed) retries \(report.progress.retries) resent \(report.progress.bytesResent)")
                    }
                    last = report
                }
                return last
            }
            let clock = ContinuousClock()
            let start = clock.now
            var failure: DFUEngineError?
            do throws(DFUEngineError) {
                try await driver.run(part: part)
            } catch {
                failure = error
            }
            let elapsed = start.duration(to: clock.now)
            await driver.finish()
            let last = await reports.value
            run.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            run.completed = failure == nil
            run.error = failure.map { "\($0)" }
            failureCode = failure?.code
            run.bytesPerSecond = run.completed && run.seconds > 0 ? Double(part.image.count) / run.seconds : 0
            let counts = transport.counts
            run.bytesResent = max(0, counts.packetBytes - part.image.count - part.initPacket.count)
            run.checkpoints = counts.checkpointReports
            run.checksumRequests = counts.checksumRequests
            run.failedCheckpoints = last?.progress.retries ?? 0
        } catch {
            run.error = "\(error)"
        }
        await att.close()
        await serving.value
        let state = await device.state()
        run.packetsDropped = Int(clamping: state.counters.packetsDropped)
        run.imageCorrect = state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(part.image)
        if !run.completed, run.imageCorrect, failureCode == .executeUnconfirmed {
            // The device reset before its Execute response went out; `bledfu flash` confirms by finding the new
            // application, the bench by reading what the device installed.
            run.completed = true
            run.bytesPerSecond = run.seconds > 0 ? Double(part.image.count) / run.seconds : 0
            run.error = "last Execute unconfirmed by the device; installed image verified"
        }
        return run
    }
}
