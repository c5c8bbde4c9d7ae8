import ATT
import BLECore
import Crypto
import DFUSimulator
import GATT
import MCUbootImage
import MCUmgr
import Synchronization
import VirtualRadio

/// A virtual SMP device and a connector that links to it over a real SEQPACKET socket pair per connection, with the
/// ATT client, the GATT SMP transport and the SMP client of the shipping code. Device and host run on the
/// continuous clock with the device's modelled durations divided by `speedup`, so nothing waits for long.
///
/// Every host deadline here only bounds a hang (``deadline``): the suite runs beside other suites and CPU hogs on a
/// two-core machine, where a link may see no CPU for many seconds, and a test must still pass there.
struct SMPTestBench {
    /// The deadline of every host wait (ATT transactions, SMP requests, chunks, the reboot): a hang, not a pace.
    static let deadline: Duration = .seconds(120)

    let device: VirtualSMPDevice
    let clientConfiguration: SMPClientConfiguration

    init(
        profile: SMPDeviceProfile = SMPTestBench.profile(), faults: SMPFaults = .none,
        client: SMPClientConfiguration = SMPClientConfiguration(timeout: SMPTestBench.deadline, retries: 2)
    ) {
        device = VirtualSMPDevice(profile: profile, faults: faults, clock: ContinuousClock())
        clientConfiguration = client
    }

    static let address: BluetoothAddress = {
        guard let address = BluetoothAddress("C0:5A:00:00:00:01") else { fatalError("test address") }
        return address
    }()

    /// An nRF52840-like profile with fast modelled time.
    static func profile(
        bufferSize: Int = 2475, bufferCount: Int = 4, reassembly: Bool = true, parameters: Bool = true, v2: Bool = true,
        downgradePrevention: Bool = false, keys: [String] = [], slotSize: Int = 0x40000, images: Int = 1
    ) -> SMPDeviceProfile {
        SMPDeviceProfile(
            name: "SMP Test", address: SMPTestBench.address,
            images: Array(repeating: SMPInstalledImage(version: "1.0.0", size: 20_000), count: images),
            smp: SMPServerOptions(
                bufferSize: bufferSize, bufferCount: bufferCount, reassembly: reassembly, mcumgrParameters: parameters,
                smpV2: v2),
            mcuboot: MCUbootOptions(slotSize: slotSize, downgradePrevention: downgradePrevention, publicKeys: keys),
            speedup: 2000)
    }

    func connect() async throws(SMPError) -> SMPClient {
        let pair: (any ATTBearer, any ATTBearer)
        do {
            pair = try SeqPacketBearer.makePair(linkInfo: LinkInfo(maximumPDUSize: 517))
        } catch {
            throw SMPError(.disconnected, "socketpair: \(error)")
        }
        let device = self.device
        let serverEnd = pair.1
        Task { await device.serve(serverEnd) }
        let att = ATTClient(bearer: pair.0, transactionTimeout: Self.deadline, clock: ContinuousClock())
        do {
            try await att.exchangeMTU()
        } catch {
            await att.close()
            throw SMPError(.disconnected, "\(error)")
        }
        let transport = try await GATTSMPTransport.open(client: GATTClient(att: att))
        return SMPClient(transport: transport, configuration: clientConfiguration, clock: ContinuousClock())
    }

    var connector: SMPUpdater.Connect {
        let bench = self
        return { () async throws(SMPError) -> SMPClient in try await bench.connect() }
    }

    /// A signed (or hash-only) image of `size` body bytes.
    static func image(size: Int, version: String = "1.1.0", seed: UInt8 = 7, key: MCUbootPrivateKey? = nil) throws -> (MCUbootImage, SMPUpdateImage) {
        var state = UInt64(seed) | 1
        let body = (0..<size).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        let image = try MCUbootImage.sign(firmware: body, version: MCUbootVersion(version) ?? MCUbootVersion(major: 1), key: key)
        return (image, SMPUpdateImage(imageIndex: 0, bytes: image.bytes, hash: image.hashTLV ?? [], version: version))
    }

    static func updater(
        _ bench: SMPTestBench, mode: SMPUpgradeMode = .testAndConfirm, window: Int = 3, adaptive: Bool = true,
        events: (@Sendable (SMPUpdateEvent) -> Void)? = nil
    ) -> SMPUpdater {
        SMPUpdater(
            configuration: SMPUpdateConfiguration(
                mode: mode,
                upload: SMPUploadConfiguration(window: window, adaptive: adaptive, firstChunkTimeout: deadline, chunkTimeout: deadline),
                rebootTimeout: deadline, reconnectInterval: .milliseconds(20)),
            clock: ContinuousClock(), events: events, connect: bench.connector)
    }
}
