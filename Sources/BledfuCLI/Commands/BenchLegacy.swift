import ATT
import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import GATT
import LegacyDFU
import LinuxIO
import SecureDFU
import VirtualRadio

/// One Legacy DFU benchmark update against an in-process virtual Legacy device over real SEQPACKET socket pairs: the
/// device paces every PDU with its link model; the engine runs as `bledfu flash` runs it, including the restarts
/// from zero a loss costs (a new connection each, up to the restart policy), so the time is what an update takes.
enum BenchLegacyRunner {
    /// The modes `bench` runs on Legacy profiles when none of the requested modes is a Legacy one.
    static let defaultModes = ["adaptive", "ios", "android", "nrfutil"]

    /// The profile ready for repeated updates: no application (it boots into its bootloader and stays there).
    static func benchProfile(_ profile: LegacyDeviceProfile, speedup: Double) -> LegacyDeviceProfile {
        var copy = profile
        copy.installed.application = nil
        copy.speedup = speedup
        if copy.kind == .infinitime { copy.installed.application = InstalledImage(version: 1) }
        return copy
    }

    /// An application part of `size` pseudo-random bytes with a 0.5 init packet the profile accepts.
    static func part(size: Int, profile: LegacyDeviceProfile) -> LegacyPart {
        let image = BenchRunner.part(size: size & ~3, profile: DeviceProfile(name: "", address: profile.address)).image
        let packet = LegacyInitPacket(
            layout: .v05, deviceType: profile.kind == .adafruit ? 0x0052 : 0xFFFF, deviceRevision: 0xFFFF,
            applicationVersion: 2, softdeviceReq: [0xFFFE], image: image)
        if profile.kind == .sdk6 {
            let crc = CRC16.ccittFalse(image)
            return LegacyPart.application(image, initPacket: [UInt8(crc & 0xFF), UInt8(crc >> 8)], layout: .crcOnly)
        }
        return LegacyPart.application(image, initPacket: packet.encode(), layout: .v05)
    }

    static func run(
        mode: String, profileName: String, profile: LegacyDeviceProfile, part: LegacyPart, repetition: Int,
        responseTimeout: Duration
    ) async -> BenchRun {
        var run = BenchRun(
            mode: mode, profile: profileName, imageBytes: part.image.count, repetition: repetition, seconds: 0,
            bytesPerSecond: 0, ceilingBytesPerSecond: 0, airBytesPerSecond: 0, flashBytesPerSecond: 0,
            protocolBoundBytesPerSecond: 0, mtu: 23, bytesResent: 0, checkpoints: 0, checksumRequests: 0,
            failedCheckpoints: 0, packetsDropped: 0, completed: false, imageCorrect: false, error: nil)
        let base: any LegacyPacingPolicy
        do {
            base = try LegacyPacingPolicies.parse(mode)
        } catch {
            run.error = error.description
            return run
        }
        let scale = profile.speedup.isFinite && profile.speedup > 0 ? profile.speedup : 0
        let ceiling = LinkModel(link: profile.link, flash: profile.flash).ceiling(mtu: 23)
        run.ceilingBytesPerSecond = ceiling.writeWithoutResponse * scale
        run.airBytesPerSecond = ceiling.airWriteWithoutResponse * scale
        run.flashBytesPerSecond = ceiling.flash * scale
        run.protocolBoundBytesPerSecond = profile.protocolBound(imageSize: part.image.count).bytesPerSecond * scale
        let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        var journal = LegacyJournal()
        let clock = ContinuousClock()
        let start = clock.now
        var failure: LegacyDFUError?
        for _ in 0...LegacyRestartPolicy().maximumRestarts {
            failure = await attempt(part, on: device, pacing: journal.pacing(base, for: 0), timeout: responseTimeout, run: &run)
            guard let error = failure, error.restartsFromZero else { break }
            journal.recordRestart(part: 0, error: error, bytesSent: run.bytesResent, window: nil)
            run.failedCheckpoints += 1
        }
        let elapsed = start.duration(to: clock.now)
        run.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        run.completed = failure == nil
        run.error = failure.map { "\($0)" }
        run.bytesPerSecond = run.completed && run.seconds > 0 ? Double(part.image.count) / run.seconds : 0
        run.bytesResent = journal.bytesResent
        let state = await device.state()
        run.packetsDropped = state.counters.packetsRefused + state.counters.packetsDropped
        run.checkpoints = state.counters.prnsSent
        run.imageCorrect = state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(part.image)
        return run
    }

    /// One connection, one attempt; nil when the image was activated.
    static func attempt(
        _ part: LegacyPart, on device: VirtualLegacyDevice, pacing: any LegacyPacingPolicy, timeout: Duration,
        run: inout BenchRun
    ) async -> LegacyDFUError? {
        let pair: (SocketBearer, SocketBearer)
        do {
            pair = try SeqPacketBearer.makeSocketPair()
        } catch {
            return LegacyDFUError(.transport, "socketpair: \(error)")
        }
        let (deviceSide, hostSide) = pair
        let serving = Task {
            await device.serve(deviceSide)
            await deviceSide.close()
        }
        let att = ATTClient(bearer: hostSide)
        var failure: LegacyDFUError?
        do {
            let transport = try await GATTLegacyTransport.open(client: GATTClient(att: att))
            var configuration = LegacyDFUConfiguration(pacing: pacing, responseTimeout: timeout)
            if let mode = LegacyDetection.mode(
                services: transport.services.map(\.uuid), version: transport.version, hasPacket: transport.packet != nil)
            {
                LegacyDetection.configure(&configuration, for: mode)
            }
            let driver = LegacyDFUDriver(transport: transport, clock: ContinuousClock(), configuration: configuration)
            do {
                try await driver.run(part: part)
            } catch {
                failure = error
                run.bytesResent = await driver.bytesSent
            }
            await driver.finish()
        } catch {
            failure = LegacyDFUError(.transport, "\(error)")
        }
        await att.close()
        await serving.value
        return failure
    }
}
