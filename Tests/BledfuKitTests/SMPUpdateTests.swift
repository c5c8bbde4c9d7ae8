import BLECore
import BledfuTestSupport
import DFUCore
import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

@testable import BledfuKit

/// Whole MCUmgr SMP updates through the shipped ``Updater`` (``SMPFamily``: upload, then test or confirm, reset,
/// reconnect, check, confirm) against virtual SMP devices over real SEQPACKET pairs (``VirtualSMPDeviceAdapter``),
/// each ending with the device's image state checked. Deadlines only bound a hang: the suite passes beside CPU hogs.
struct SMPKitBench {
    static let address: BluetoothAddress = {
        guard let address = BluetoothAddress("C0:5A:00:00:00:01") else { preconditionFailure("a constant address") }
        return address
    }()
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    let device: VirtualSMPDevice

    init(profile: SMPDeviceProfile = SMPKitBench.profile(), faults: SMPFaults = .none) {
        device = VirtualSMPDevice(profile: profile, faults: faults, clock: ContinuousClock())
    }

    /// An nRF52840-like profile with fast modelled time.
    static func profile(
        bufferSize: Int = 2475, bufferCount: Int = 4, reassembly: Bool = true, parameters: Bool = true, v2: Bool = true,
        downgradePrevention: Bool = false, keys: [String] = []
    ) -> SMPDeviceProfile {
        SMPDeviceProfile(
            name: "SMP Test", address: address, images: [SMPInstalledImage(version: "1.0.0", size: 20_000)],
            smp: SMPServerOptions(
                bufferSize: bufferSize, bufferCount: bufferCount, reassembly: reassembly, mcumgrParameters: parameters,
                smpV2: v2),
            mcuboot: MCUbootOptions(slotSize: 0x40000, downgradePrevention: downgradePrevention, publicKeys: keys),
            speedup: 2000)
    }

    /// A bundled profile (Firmware/NAME.json) with fast modelled time.
    static func profile(_ name: String) throws -> SMPDeviceProfile {
        var profile = try JSONDecoder().decode(
            SMPDeviceProfile.self, from: Data(contentsOf: root.appendingPathComponent("Firmware/\(name).json")))
        profile.speedup = 2000
        return profile
    }

    /// A hash-only MCUboot image of `size` pseudo-random body bytes.
    static func image(size: Int, version: String = "1.1.0", seed: UInt64 = 7) throws -> MCUbootImage {
        try MCUbootImage.sign(
            firmware: SyntheticPackage.image(size, seed: seed), version: MCUbootVersion(version) ?? MCUbootVersion(major: 1),
            key: nil)
    }

    /// A sample file of Firmware/samples.
    static func sample(_ name: String) throws -> PackageSource {
        SyntheticPackage.source(Array(try Data(contentsOf: root.appendingPathComponent("Firmware/samples/\(name)"))), fileName: name)
    }

    /// One update of `package` with the default families; its events and its end.
    func update(
        _ package: PackageSource, confirm: String = "test-and-confirm", mode: String = "adaptive",
        journal: any UpdateJournalStore = InMemoryUpdateJournalStore(), onEvent: (@Sendable (UpdateEvent, UpdateRun) -> Void)? = nil
    ) async -> (events: [UpdateEvent], result: Result<UpdateResult, DFUError>) {
        let request = UpdateRequest(
            package: package, target: .address(PeerAddress(device.profile.address, type: .random)),
            options: UpdateOptions(
                pacing: mode, responseTimeout: .seconds(60), rebootDelay: .milliseconds(20), settings: ["smp.confirm": confirm]),
            reconnect: ReconnectPolicy(initialDelay: .zero), scanTimeout: .seconds(60), connectTimeout: .seconds(60))
        let run = Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock(), journal: journal)
            .start(request)
        var events: [UpdateEvent] = []
        for await event in run {
            events.append(event)
            onEvent?(event, run)
        }
        do {
            return (events, .success(try await run.result()))
        } catch {
            return (events, .failure(error))
        }
    }
}

@Suite(.timeLimit(.minutes(10))) struct SMPUpdateTests {
    static func source(_ image: MCUbootImage) -> PackageSource { SyntheticPackage.source(image.bytes, fileName: "app.bin") }

    @Test(arguments: ["test-and-confirm", "confirm-only"])
    func updateEndsWithTheNewImageConfirmed(_ confirm: String) async throws {
        let bench = SMPKitBench()
        let image = try SMPKitBench.image(size: 60_000)
        let (_, outcome) = await bench.update(Self.source(image), confirm: confirm)
        let result = try outcome.get()
        #expect(result.family == .smp)
        let state = await bench.device.imageState()
        let active = try #require(state.active())
        #expect(active.hash == image.hashTLV && active.confirmed && active.version == "1.1.0")
        // A permanent swap leaves nothing to revert; the old image stays in the secondary slot unconfirmed.
        #expect(state.images.first { $0.slot == 1 }?.pending != true)
        let counters = await bench.device.state().counters
        #expect(counters.swaps == 1)
        // Pipelined with buf_count − 1 = 3 chunks in flight and nothing lost: nothing written twice.
        #expect(counters.uploadBytesWritten == image.bytes.count)
        #expect(result.statistics.bytesSent == image.bytes.count)
    }

    /// `one-at-a-time` (window 1), `adaptive` (the device's buf_count − 1, halved on losses), `window:4` (buf_count 4
    /// leaves no buffer for responses at times, Zephyr #44898: answers are lost, the upload rewinds): the same image.
    @Test(arguments: ["one-at-a-time", "adaptive", "window:4"])
    func windowsUploadTheSameImage(mode: String) async throws {
        let bench = SMPKitBench(profile: SMPKitBench.profile(bufferCount: 4))
        let image = try SMPKitBench.image(size: 40_000, seed: UInt64(mode.count))
        _ = try await bench.update(Self.source(image), mode: mode).result.get()
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hashTLV && active.confirmed)
    }

    /// An old server: v1 answers, no mcumgr_params (ENOTSUP), no reassembly: one write per request (MTU − 3), with
    /// Zephyr's 384-byte buffers and an ATT MTU that fits one.
    @Test func smpV1ServerAndNoParameters() async throws {
        var profile = SMPKitBench.profile(bufferSize: 384, reassembly: false, parameters: false, v2: false)
        profile.link.maxMTU = 252
        let bench = SMPKitBench(profile: profile)
        let image = try SMPKitBench.image(size: 25_000, seed: 3)
        _ = try await bench.update(Self.source(image)).result.get()
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hashTLV && active.confirmed)
    }

    /// A lost link at seeded offsets: the updater reconnects and the upload resumes at the device's offset; at most
    /// one window (plus the resume's first chunk) is sent twice.
    @Test(arguments: [5_000, 17_000, 33_333])
    func disconnectsAtSeededOffsetsResumeFromTheDeviceOffset(_ offset: Int) async throws {
        let bench = SMPKitBench(faults: SMPFaults(plan: try FaultPlan(parsing: "disconnect-after-bytes=\(offset)")))
        let image = try SMPKitBench.image(size: 50_000, seed: UInt64(offset))
        let result = try await bench.update(Self.source(image)).result.get()
        #expect(result.statistics.reconnects == 1)
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hashTLV && active.confirmed)
        let counters = await bench.device.state().counters
        #expect(counters.uploadBytesReceived <= image.bytes.count + 4 * 2475, "\(counters)")
    }

    /// A run stopped half way (``UpdateRun/stop()``: a safe point) and a rerun with a journal that knows nothing of
    /// it (as a killed tool's): the rerun starts at the offset the device holds and ends confirmed.
    @Test func aStoppedRunResumesOnTheRerun() async throws {
        let bench = SMPKitBench()
        let image = try SMPKitBench.image(size: 80_000, seed: 9)
        let (_, first) = await bench.update(Self.source(image)) { event, run in
            if case .progress(let progress) = event, progress.bytes >= 30_000 { _ = run.stop() }
        }
        #expect(throws: DFUError(.stopped, "")) { try first.get() }
        let held = try #require(await bench.device.state().upload?.offset)
        #expect(held >= 30_000 && held < image.bytes.count)
        let (events, second) = await bench.update(Self.source(image))
        _ = try second.get()
        let resumedAt = events.lazy.compactMap { event -> Int? in if case .progress(let p) = event { p.bytes } else { nil } }.first
        #expect((resumedAt ?? 0) >= held, "held \(held), resumed at \(String(describing: resumedAt))")
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hashTLV && active.confirmed)
    }

    @Test func aCrashingNewImageIsReportedAsReverted() async throws {
        let bench = SMPKitBench(faults: SMPFaults(crashNewImage: true))
        let old = await bench.device.imageState().active()?.hash
        let (_, outcome) = await bench.update(Self.source(try SMPKitBench.image(size: 20_000, seed: 11)))
        #expect(throws: DFUError(.reverted, "")) { try outcome.get() }
        #expect(await bench.device.imageState().active()?.hash == old)
    }

    /// A device that reports MCUboot's downgrade prevention (bootloader info `no-downgrade`) is not sent an older
    /// image: refused before the upload (device-mismatch, nothing written), where MCUboot would erase it at boot.
    @Test func downgradePreventionRefusesAnOlderImage() async throws {
        let bench = SMPKitBench(profile: SMPKitBench.profile(downgradePrevention: true))
        let (_, outcome) = await bench.update(Self.source(try SMPKitBench.image(size: 20_000, version: "0.9.0", seed: 12)))
        #expect(throws: DFUError(.deviceMismatch, "")) { try outcome.get() }
        #expect(await bench.device.imageState().active()?.version == "1.0.0")
        #expect(await bench.device.state().counters.uploadBytesWritten == 0)
    }

    @Test func aRerunAfterTheUpdateIsANoOp() async throws {
        let bench = SMPKitBench()
        let image = try SMPKitBench.image(size: 20_000, seed: 13)
        _ = try await bench.update(Self.source(image)).result.get()
        let received = await bench.device.state().counters.uploadBytesReceived
        _ = try await bench.update(Self.source(image)).result.get()
        #expect(await bench.device.state().counters.uploadBytesReceived == received, "nothing sent again")
        #expect(await bench.device.state().counters.swaps == 1)
    }

    @Test func braceletTakesBothImagesOfTheNCSZip() async throws {
        let bench = SMPKitBench(profile: try SMPKitBench.profile("smp-bracelet"))
        let package = try SMPKitBench.sample("smp-bracelet-app-v2.zip")
        let parts = try MCUbootPackage(bytes: package.bytes, name: package.fileName).parts
        #expect(parts.map(\.imageIndex).sorted() == [0, 1])
        _ = try await bench.update(package).result.get()
        let state = await bench.device.imageState()
        for part in parts {
            let active = try #require(state.active(image: part.imageIndex))
            #expect(active.hash == part.image.hashTLV && active.confirmed && active.version == "2.0.0")
        }
    }

    /// MCUboot validates the signature before the swap: an image without the device's key is erased and the old one
    /// boots; the signed sample goes in.
    @Test func sensorRefusesAnImageSignedWithAnotherKey() async throws {
        let bench = SMPKitBench(profile: try SMPKitBench.profile("smp-sensor"))
        let (_, unsigned) = await bench.update(Self.source(try SMPKitBench.image(size: 30_000, version: "2.0.0", seed: 40)))
        #expect(throws: DFUError(.reverted, "")) { try unsigned.get() }
        #expect(await bench.device.state().lastBoot?.contains("signature") == true)
        let signed = try SMPKitBench.sample("smp-sensor-app-v2.bin")
        _ = try await bench.update(signed).result.get()
        #expect(await bench.device.imageState().active()?.hash == (try MCUbootImage(bytes: signed.bytes)).hashTLV)
    }

    @Test func persistentStateSurvivesAPowerCycle() async throws {
        let profile = try SMPKitBench.profile("smp-sensor")
        let bench = SMPKitBench(profile: profile)
        _ = try await bench.update(try SMPKitBench.sample("smp-sensor-app-v2.bin"), confirm: "upload-only").result.get()
        let saved = try JSONEncoder().encode(await bench.device.persistentState())
        let restored = VirtualSMPDevice(
            profile: profile, clock: ContinuousClock(), restoring: try JSONDecoder().decode(SMPDevicePersistentState.self, from: saved))
        #expect(await restored.imageState() == (await bench.device.imageState()))
        #expect(await restored.state().upload == nil, "the upload state is RAM")
        let status = try JSONEncoder().encode(await restored.state())
        #expect(try JSONDecoder().decode(SMPDeviceState.self, from: status).images.count == 2)
    }

    static let lies: [(SMPDeviceLie, DFUError.Code)] = [
        (.offsetBackwards, .protocolViolation), (.offsetPastEnd, .protocolViolation), (.wrongSequence, .protocolViolation),
        (.wrongReturnCode, .remoteRefusal), (.wrongCommand, .protocolViolation), (.corruptImage, .reverted),
    ]

    /// Devices that lie end in a clear error, never in a confirmed wrong image.
    @Test(arguments: lies)
    func liesEndInAClearError(_ lie: SMPDeviceLie, _ expected: DFUError.Code) async throws {
        let bench = SMPKitBench(faults: SMPFaults(lie: lie, lieAfterBytes: 12_000))
        let before = await bench.device.imageState().active()
        let (_, outcome) = await bench.update(Self.source(try SMPKitBench.image(size: 40_000, seed: 21)))
        do {
            _ = try outcome.get()
            Issue.record("a device lying with \(lie) was updated")
        } catch {
            #expect(error.code == expected, "\(lie): \(error)")
            #expect(!error.message.isEmpty && !error.message.contains("\n"))
        }
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == before?.hash && active.confirmed)
    }
}
