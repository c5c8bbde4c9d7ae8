import ATT
import BLECore
import DFUSimulator
import Foundation
import GATT
import MCUbootImage
import MCUmgr
import VirtualRadio

/// One benchmark upload to an in-process virtual SMP device over a real SEQPACKET socket pair: the upload exactly as
/// `bledfu flash` runs it for an SMP device (``SMPUploader`` with the mode's window and packet size), measured
/// against the SMP bound of the same model (``SMPBound``). Only the upload is timed: test, reset and confirm take
/// the same time in every mode.
enum BenchSMPRunner {
    /// Modes `bench` runs on SMP profiles by default: Nordic's pipelined settings, ours, and the mcumgr CLI.
    static let defaultModes = ["adaptive", "nordic", "one-at-a-time", "mcumgr-cli"]

    /// The profile ready for a fresh upload: slots large enough, no signature checks, the bench's speedup.
    static func benchProfile(_ profile: SMPDeviceProfile, imageBytes: Int, speedup: Double) -> SMPDeviceProfile {
        var copy = profile
        copy.mcuboot.publicKeys = []
        copy.mcuboot.slotSize = max(copy.mcuboot.slotSize, imageBytes + 64 * 1024)
        copy.speedup = speedup
        return copy
    }

    /// A hash-only MCUboot image of `size` bytes in all (header, body, TLVs), the same for a given size.
    static func image(size: Int) throws -> MCUbootImage {
        var state: UInt64 = 0x5EED_0000 ^ UInt64(size)
        let body = (0..<max(size - 0x200 - 48, 16)).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        return try MCUbootImage.sign(firmware: body, version: MCUbootVersion(major: 2), key: nil)
    }

    static func run(mode: String, profileName: String, profile: SMPDeviceProfile, image: MCUbootImage, repetition: Int, timeout: Duration)
        async -> BenchRun
    {
        var run = BenchRun(
            mode: mode, profile: profileName, imageBytes: image.bytes.count, repetition: repetition, seconds: 0,
            bytesPerSecond: 0, ceilingBytesPerSecond: 0, airBytesPerSecond: 0, flashBytesPerSecond: 0,
            protocolBoundBytesPerSecond: 0, mtu: 0, bytesResent: 0, checkpoints: 0, checksumRequests: 0,
            failedCheckpoints: 0, packetsDropped: 0, completed: false, imageCorrect: false, error: nil)
        let device = VirtualSMPDevice(profile: profile, clock: ContinuousClock())
        let pair: (any ATTBearer, any ATTBearer)
        do {
            pair = try SeqPacketBearer.makePair(linkInfo: LinkInfo(maximumPDUSize: 517))
        } catch {
            run.error = "socketpair: \(error)"
            return run
        }
        let deviceSide = pair.1
        let serving = Task { await device.serve(deviceSide) }
        let att = ATTClient(bearer: pair.0)
        do {
            run.mtu = try await att.exchangeMTU()
            let transport = try await GATTSMPTransport.open(client: GATTClient(att: att))
            let client = SMPClient(transport: transport, configuration: SMPClientConfiguration(timeout: timeout), clock: ContinuousClock())
            let parameters = try? SMPParameters(body: try await client.send(.mcumgrParameters))
            guard let (configuration, limit) = SMPPacing.configuration(mode, parameters: parameters, mtu: run.mtu) else {
                throw SMPError(.invalidArgument, "--modes \(mode) is not an SMP mode (\(SMPPacing.modes))")
            }
            // One bound per profile for every mode: requests of the device's buf_size (what its mcumgr_params allow).
            fill(&run, profile: profile, packetLimit: SMPUploader.packetLimit(mtu: run.mtu, parameters: parameters))
            let uploader = SMPUploader(client: client, clock: ContinuousClock())
            let clock = ContinuousClock()
            let start = clock.now
            let result = try await uploader.upload(image.bytes, configuration: configuration, packetLimit: limit)
            let elapsed = start.duration(to: clock.now)
            run.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            run.completed = true
            run.bytesPerSecond = run.seconds > 0 ? Double(image.bytes.count) / run.seconds : 0
            run.bytesResent = result.bytesResent
            run.failedCheckpoints = result.chunksResent
        } catch {
            run.error = "\(error)"
        }
        await att.close()
        await serving.value
        let state = await device.state()
        run.checkpoints = state.counters.requests
        run.packetsDropped = state.counters.requestsDropped + state.counters.responsesDropped
        run.imageCorrect = await device.imageState().slot(withHash: image.hashTLV ?? [])?.slot == 1
        return run
    }

    /// The model's figures at the negotiated MTU and packet size: the link ceiling and the SMP bound.
    static func fill(_ run: inout BenchRun, profile: SMPDeviceProfile, packetLimit: Int) {
        let scale = profile.speedup.isFinite && profile.speedup > 0 ? profile.speedup : 0
        let ceiling = LinkModel(link: profile.link, flash: FlashParameters()).ceiling(mtu: run.mtu)
        let flash = 4_000_000 / max(profile.mcuboot.wordWriteMicros, 0.001)
        let bound = profile.smpBound(imageBytes: run.imageBytes, mtu: run.mtu, packetLimit: packetLimit)
        run.airBytesPerSecond = ceiling.airWriteWithoutResponse * scale
        run.flashBytesPerSecond = flash * scale
        run.ceilingBytesPerSecond = min(ceiling.airWriteWithoutResponse, flash) * scale
        run.protocolBoundBytesPerSecond = bound.bytesPerSecond * scale
    }
}
