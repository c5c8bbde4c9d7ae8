import BLECore
import DFUSimulator
import GATT
import MCUbootImage
import MCUmgr

/// SMP's part of the bench: one upload to a fresh virtual SMP device (``BenchLoop``), exactly as `bledfu flash`
/// runs it for an SMP device (``SMPUploader`` with the mode's window and packet size), measured against the SMP
/// bound of the same model (``SMPBound``). Only the upload is timed: test, reset and confirm take the same time in
/// every mode.
public enum SMPBench {
    /// Modes `bench` runs on SMP profiles by default: ours, Nordic's pipelined settings, and the mcumgr CLI.
    public static let defaultModes = ["adaptive", "nordic", "one-at-a-time", "mcumgr-cli"]

    /// Whether `mode` is one of SMP's (``SMPPacing``).
    public static func isMode(_ mode: String) -> Bool { SMPPacing.configuration(mode, parameters: nil, mtu: 247) != nil }

    /// The SMP modes among `requested`; when none is one (or nothing was requested), ``defaultModes``.
    public static func modes(_ requested: [String]?) -> [String] {
        let listed = (requested ?? []).filter(isMode)
        return listed.isEmpty ? defaultModes : listed
    }

    /// The profile ready for a fresh upload: slots large enough, no signature checks, the bench's speedup.
    public static func benchProfile(_ profile: SMPDeviceProfile, imageBytes: Int, speedup: Double) -> SMPDeviceProfile {
        var copy = profile
        copy.mcuboot.publicKeys = []
        copy.mcuboot.slotSize = max(copy.mcuboot.slotSize, imageBytes + 64 * 1024)
        copy.speedup = speedup
        return copy
    }

    /// A hash-only MCUboot image of `size` bytes in all, the same for a given size: the 0x200-byte header, the
    /// body, the TLV area (its 4-byte info header and the SHA-256 TLV, 4 + 32 bytes).
    public static func image(size: Int) throws -> MCUbootImage {
        var state: UInt64 = 0x5EED_0000 ^ UInt64(size)
        let body = (0..<max(size - 0x200 - 40, 16)).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        return try MCUbootImage.sign(firmware: body, version: MCUbootVersion(major: 2), key: nil)
    }

    static func run(
        mode: String, profileName: String, profile: SMPDeviceProfile, image: MCUbootImage, repetition: Int,
        timeout: Duration
    ) async -> BenchRun {
        var run = BenchRun(mode: mode, profile: profileName, imageBytes: image.bytes.count, repetition: repetition)
        let device = VirtualSMPDevice(profile: profile, clock: ContinuousClock())
        do throws(BenchSetupError) {
            try await BenchLoop.connect(to: device, linkInfo: LinkInfo(maximumPDUSize: 517), secure: true) { link in
                await upload(image, on: link.att, profile: profile, timeout: timeout, run: &run)
            }
        } catch {
            run.error = error.reason
            return run
        }
        let state = await device.state()
        run.checkpoints = state.counters.requests
        run.packetsDropped = state.counters.requestsDropped + state.counters.responsesDropped
        run.imageCorrect = await device.imageState().slot(withHash: image.hashTLV ?? [])?.slot == 1
        return run
    }

    /// The upload on one connection: MTU, the device's parameters, the mode's window and packet size, timed.
    static func upload(
        _ image: MCUbootImage, on att: ATTClient, profile: SMPDeviceProfile, timeout: Duration, run: inout BenchRun
    ) async {
        do {
            run.mtu = try await att.exchangeMTU()
            let transport = try await GATTSMPTransport.open(client: GATTClient(att: att))
            let client = SMPClient(
                transport: transport, configuration: SMPClientConfiguration(timeout: timeout), clock: ContinuousClock())
            let parameters = try? SMPParameters(body: try await client.send(.mcumgrParameters))
            guard let (configuration, limit) = SMPPacing.configuration(run.mode, parameters: parameters, mtu: run.mtu)
            else {
                throw SMPError(.invalidArgument, "--modes \(run.mode) is not an SMP mode (\(SMPPacing.modes))")
            }
            // One bound per profile for every mode: requests of the device's buf_size (what its mcumgr_params allow).
            fill(&run, profile: profile, packetLimit: SMPUploader.packetLimit(mtu: run.mtu, parameters: parameters))
            let uploader = SMPUploader(client: client, clock: ContinuousClock())
            let (result, seconds) = await BenchLoop.timed { () async -> Result<SMPUploadResult, SMPError> in
                do throws(SMPError) {
                    return .success(try await uploader.upload(image.bytes, configuration: configuration, packetLimit: limit))
                } catch {
                    return .failure(error)
                }
            }
            let uploaded = try result.get()
            run.finish(seconds: seconds, completed: true)
            run.bytesResent = uploaded.bytesResent
            run.failedCheckpoints = uploaded.chunksResent
        } catch {
            run.error = "\(error)"
        }
    }

    /// The model's figures at the negotiated MTU and packet size: the link ceiling and the SMP bound.
    static func fill(_ run: inout BenchRun, profile: SMPDeviceProfile, packetLimit: Int) {
        let scale = BenchLoop.scale(profile.speedup)
        let ceiling = LinkModel(link: profile.link, flash: FlashParameters()).ceiling(mtu: run.mtu)
        let flash = 4_000_000 / max(profile.mcuboot.wordWriteMicros, 0.001)
        let bound = profile.smpBound(imageBytes: run.imageBytes, mtu: run.mtu, packetLimit: packetLimit)
        run.airBytesPerSecond = ceiling.airWriteWithoutResponse * scale
        run.flashBytesPerSecond = flash * scale
        run.ceilingBytesPerSecond = min(ceiling.airWriteWithoutResponse, flash) * scale
        run.protocolBoundBytesPerSecond = bound.bytesPerSecond * scale
    }
}
