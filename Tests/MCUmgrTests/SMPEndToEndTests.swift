import BLECore
import CBOR
import DFUSimulator
import MCUbootImage
import MCUmgr
import Testing

/// Uploads and updates against the virtual SMP device in-process over real SEQPACKET pairs, each ending with the
/// device's confirmed image hash checked.
@Suite(.timeLimit(.minutes(10))) struct SMPEndToEndTests {
    @Test(arguments: [SMPUpgradeMode.testAndConfirm, .confirmOnly])
    func updateEndsWithTheNewImageConfirmed(_ mode: SMPUpgradeMode) async throws {
        let bench = SMPTestBench()
        let (_, image) = try SMPTestBench.image(size: 60_000)
        let report = try await SMPTestBench.updater(bench, mode: mode).run([image])
        let state = await bench.device.imageState()
        let active = try #require(state.active())
        #expect(active.hash == image.hash)
        #expect(active.confirmed)
        #expect(active.version == "1.1.0")
        #expect(report.finalState?.active()?.hash == image.hash)
        #expect(report.uploads[0]?.totalBytes == image.bytes.count)
        // A permanent swap leaves nothing to revert; the old image stays in the secondary slot unconfirmed.
        #expect(state.images.first { $0.slot == 1 }?.pending != true)
        let counters = await bench.device.state().counters
        #expect(counters.swaps == 1)
        // Pipelined with buf_count − 1 = 3 chunks in flight and nothing lost: nothing written twice.
        #expect(counters.uploadBytesWritten == image.bytes.count)
    }

    @Test func uploadOnlyLeavesTheImageInTheSecondarySlot() async throws {
        let bench = SMPTestBench()
        let (_, image) = try SMPTestBench.image(size: 30_000)
        _ = try await SMPTestBench.updater(bench, mode: .uploadOnly).run([image])
        let state = await bench.device.imageState()
        #expect(state.active()?.hash != image.hash)
        let secondary = try #require(state.slot(withHash: image.hash))
        #expect(secondary.slot == 1)
        #expect(!secondary.pending && !secondary.confirmed)
        #expect(await bench.device.state().counters.swaps == 0)
    }

    @Test(arguments: [(1, false), (3, true), (4, false)])
    func windowsUploadTheSameImage(window: Int, adaptive: Bool) async throws {
        // window 4 with buf_count 4 leaves no buffer for responses at times (Zephyr #44898): answers are lost, the
        // upload rewinds and still ends with the right image.
        let bench = SMPTestBench(profile: SMPTestBench.profile(bufferCount: 4))
        let (_, image) = try SMPTestBench.image(size: 40_000, seed: UInt8(window))
        let configuration = SMPUpdateConfiguration(
            mode: .testAndConfirm,
            upload: SMPUploadConfiguration(
                window: window, adaptive: adaptive, firstChunkTimeout: SMPTestBench.deadline, chunkTimeout: SMPTestBench.deadline),
            windowFromDevice: false, rebootTimeout: SMPTestBench.deadline, reconnectInterval: .milliseconds(20))
        _ = try await SMPUpdater(configuration: configuration, connect: bench.connector).run([image])
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hash && active.confirmed)
    }

    @Test func smpV1ServerAndNoParameters() async throws {
        // An old server: v1 answers, no mcumgr_params (ENOTSUP), no reassembly: one write per request (MTU − 3).
        // Zephyr's defaults: 384-byte buffers and an ATT MTU that fits one (BT_L2CAP_TX_MTU below the buffer).
        var profile = SMPTestBench.profile(bufferSize: 384, reassembly: false, parameters: false, v2: false)
        profile.link.maxMTU = 252
        let bench = SMPTestBench(profile: profile)
        let (_, image) = try SMPTestBench.image(size: 25_000, seed: 3)
        _ = try await SMPTestBench.updater(bench).run([image])
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hash && active.confirmed)
    }

    @Test(arguments: [5_000, 17_000, 33_333])
    func disconnectsAtSeededOffsetsResumeFromTheDeviceOffset(_ offset: Int) async throws {
        let faults = SMPFaults(plan: try FaultPlan(parsing: "disconnect-after-bytes=\(offset)"))
        let bench = SMPTestBench(faults: faults)
        let (_, image) = try SMPTestBench.image(size: 50_000, seed: UInt8(offset % 251))
        let report = try await SMPTestBench.updater(bench).run([image])
        #expect(report.reconnects == 1)
        let resumed = try #require(report.uploads[0])
        #expect(resumed.startOffset >= offset, "the rerun resumed at the device's offset")
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hash && active.confirmed)
        // At most one window (plus the resume's first chunk) of data was sent twice.
        let counters = await bench.device.state().counters
        let chunk = 2475
        #expect(counters.uploadBytesReceived <= image.bytes.count + 4 * chunk, "\(counters)")
    }

    @Test func aKilledToolResumesOnTheRerun() async throws {
        // The first run stops half way (as a killed tool: nothing is kept on the host); the rerun asks the device.
        let bench = SMPTestBench()
        let (_, image) = try SMPTestBench.image(size: 80_000, seed: 9)
        let (progress, reached) = AsyncStream<Int>.makeStream()
        let first = SMPTestBench.updater(bench) { event in
            if case .progress(_, let upload) = event { reached.yield(upload.offset) }
        }
        let task = Task {
            defer { reached.finish() }
            return try await first.run([image])
        }
        // Stop once the device has confirmed 30 000 bytes (the stream ends with the run: no wait without an end).
        for await offset in progress where offset >= 30_000 {
            await first.requestStop()
            break
        }
        let stopped = await task.result
        #expect(throws: SMPError(.stopped, "")) { try stopped.get() }
        let held = try #require(await bench.device.state().upload?.offset)
        #expect(held >= 30_000)
        let report = try await SMPTestBench.updater(bench).run([image])
        // The rerun starts at the device's offset: what it held at the stop, or more when a request of the stopped
        // run still in the device's work queue was written after that read (a loaded machine).
        let resumed = try #require(report.uploads[0]).startOffset
        #expect(resumed >= held && resumed < image.bytes.count, "held \(held), resumed at \(resumed)")
        let active = try #require(await bench.device.imageState().active())
        #expect(active.hash == image.hash && active.confirmed)
    }

    @Test func aCrashingNewImageIsReportedAsReverted() async throws {
        let bench = SMPTestBench(faults: SMPFaults(crashNewImage: true))
        let (_, image) = try SMPTestBench.image(size: 20_000, seed: 11)
        let old = await bench.device.imageState().active()?.hash
        await #expect(throws: SMPError(.reverted, "")) { _ = try await SMPTestBench.updater(bench).run([image]) }
        #expect(await bench.device.imageState().active()?.hash == old)
    }

    @Test func downgradePreventionRefusesAnOlderImage() async throws {
        let bench = SMPTestBench(profile: SMPTestBench.profile(downgradePrevention: true))
        let (_, image) = try SMPTestBench.image(size: 20_000, version: "0.9.0", seed: 12)
        await #expect(throws: SMPError(.reverted, "")) { _ = try await SMPTestBench.updater(bench).run([image]) }
        #expect(await bench.device.imageState().active()?.version == "1.0.0")
        #expect(await bench.device.state().lastBoot?.contains("downgrade") == true)
    }

    @Test func aRerunAfterTheUpdateIsANoOp() async throws {
        let bench = SMPTestBench()
        let (_, image) = try SMPTestBench.image(size: 20_000, seed: 13)
        _ = try await SMPTestBench.updater(bench).run([image])
        let again = try await SMPTestBench.updater(bench).run([image])
        #expect(again.uploads.isEmpty)
        #expect(await bench.device.state().counters.swaps == 1)
    }
}
