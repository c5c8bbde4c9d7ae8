import BLECore
import DFUPackage
import DFUSimulator
import GATT
import LegacyDFU

/// Legacy DFU's part of the bench: one update to a fresh virtual Legacy device, the engine as `bledfu flash` runs
/// it, including the restarts from zero a loss costs (a new connection each through ``BenchLoop``, up to the restart
/// policy), so the time is what an update takes; measured against the Legacy protocol's bound of the same model.
public enum LegacyBench {
    /// The modes `bench` runs on Legacy profiles when none of the requested modes is a Legacy one.
    public static let defaultModes = ["adaptive", "ios", "android", "nrfutil"]

    /// The Legacy modes among `requested` (nil: the Secure defaults, the Legacy ones among them); when none is a
    /// Legacy mode, ``defaultModes``.
    public static func modes(_ requested: [String]?) -> [String] {
        let listed = (requested ?? SecureBench.defaultModes).filter { (try? LegacyPacingPolicies.parse($0)) != nil }
        return listed.isEmpty ? defaultModes : listed
    }

    /// The profile ready for repeated updates: no application (it boots into its bootloader and stays there).
    public static func benchProfile(_ profile: LegacyDeviceProfile, speedup: Double) -> LegacyDeviceProfile {
        var copy = profile
        copy.installed.application = nil
        copy.speedup = speedup
        if copy.kind == .infinitime { copy.installed.application = InstalledImage(version: 1) }
        return copy
    }

    /// An application part of `size` pseudo-random bytes with a 0.5 init packet the profile accepts.
    public static func part(size: Int, profile: LegacyDeviceProfile) -> LegacyPart {
        let image = SecureBench.image(size: size & ~3)
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
        // The MTU the link gets (ATT_MTU exchanged as `bledfu flash` does, the device's at most) and the packets the
        // family sends on it (20, or MTU − 3 where the device takes it: LegacyDFUFamily.packetSize).
        let mtu = min(Int(ATTClient.defaultRxMTU), max(profile.link.maxMTU, 23))
        var run = BenchRun(mode: mode, profile: profileName, imageBytes: part.image.count, repetition: repetition, mtu: mtu)
        let base: any LegacyPacingPolicy
        do {
            base = try LegacyPacingPolicies.parse(mode)
        } catch {
            run.error = error.description
            return run
        }
        let scale = BenchLoop.scale(profile.speedup)
        let identity = LegacyBootloaderIdentity(
            manufacturer: profile.kind == .adafruit ? LegacyBootloaderIdentity.adafruitManufacturer : nil)
        let packetSize = LegacyDFUFamily.packetSize(mtu: mtu, identity: identity, pacing: base)
        // The link's Write Without Response ceiling for packets of that size (InfiniTime gets MTU 247 and 20-byte
        // packets: the ceiling of MTU 23 is what a host can reach there).
        let ceiling = LinkModel(link: profile.link, flash: profile.flash).ceiling(mtu: packetSize + 3)
        run.ceilingBytesPerSecond = ceiling.writeWithoutResponse * scale
        run.airBytesPerSecond = ceiling.airWriteWithoutResponse * scale
        run.flashBytesPerSecond = ceiling.flash * scale
        // The bound in the packets the device takes (an ideal host sends no smaller ones).
        run.protocolBoundBytesPerSecond =
            profile.protocolBound(imageSize: part.image.count, packetSize: min(profile.packetMaxLength, max(packetSize, 20)))
            .bytesPerSecond * scale
        let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        var journal = LegacyJournal()
        let (failure, seconds) = await BenchLoop.timed { () async -> LegacyDFUError? in
            var failure: LegacyDFUError?
            for _ in 0...LegacyRestartPolicy().maximumRestarts {
                let pacing = journal.pacing(base, for: 0)
                let (error, sent) = await attempt(
                    part, on: device, pacing: pacing, timeout: responseTimeout, packetSize: packetSize)
                failure = error
                guard let error, error.restartsFromZero else { break }
                journal.recordRestart(part: 0, error: error, bytesSent: sent, window: nil)
                run.failedCheckpoints += 1
            }
            return failure
        }
        run.finish(seconds: seconds, completed: failure == nil)
        run.error = failure.map { "\($0)" }
        run.bytesResent = journal.bytesResent
        let state = await device.state()
        run.packetsDropped = state.counters.packetsRefused + state.counters.packetsDropped
        run.checkpoints = state.counters.prnsSent
        run.imageCorrect = state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(part.image)
        return run
    }

    /// One connection, one attempt: nil when the image was activated, else the failure and the bytes sent.
    static func attempt(
        _ part: LegacyPart, on device: VirtualLegacyDevice, pacing: any LegacyPacingPolicy, timeout: Duration,
        packetSize: Int = 20
    ) async -> (LegacyDFUError?, Int) {
        do throws(BenchSetupError) {
            return try await BenchLoop.connect(to: device) { link in
                do {
                    if packetSize > 20 { _ = try await link.att.exchangeMTU() }
                    let transport = try await GATTLegacyTransport.open(client: GATTClient(att: link.att))
                    var configuration = LegacyDFUConfiguration(pacing: pacing, responseTimeout: timeout)
                    configuration.packetSize = packetSize
                    if let mode = LegacyDetection.mode(
                        services: transport.services.map(\.uuid), version: transport.version,
                        hasPacket: transport.packet != nil)
                    {
                        LegacyDetection.configure(&configuration, for: mode)
                    }
                    let driver = LegacyDFUDriver(
                        transport: transport, clock: ContinuousClock(), configuration: configuration)
                    var outcome: (LegacyDFUError?, Int) = (nil, 0)
                    do throws(LegacyDFUError) {
                        try await driver.run(part: part)
                    } catch {
                        outcome = (error, await driver.bytesSent)
                    }
                    await driver.finish()
                    return outcome
                } catch {
                    return (LegacyDFUError(.transport, "\(error)"), 0)
                }
            }
        } catch {
            return (LegacyDFUError(.transport, error.reason), 0)
        }
    }
}
