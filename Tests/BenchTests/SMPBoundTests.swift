import DFUSimulator
import Foundation
import MCUmgr
import Testing

@testable import Bench

/// `SMPBound` (the SMP counterpart of the Secure DFU protocol bound, issue 16): a vector computed by hand, the
/// pipelined bound never below one request at a time, and a measured upload never above the bound.
@Suite(.timeLimit(.minutes(5))) struct SMPBoundTests {
    /// smp-sensor (buf_size 2475, ATT_MTU 498, 2M, LL 251, 7.5 ms, 6 per event; 85 ms pages, 41 µs per word), a
    /// 24 KiB image, computed by hand:
    /// - later chunks: {"off": 24576, "data": h''} is a2 + 63 "off" + 19 6000 + 64 "data" + 40 = 14 bytes; with the
    ///   8-byte SMP header the data may take 2475 − (8 + 14 − 1) = 2454 bytes with its head: 2451 (head 59 xx xx);
    /// - the first: {"off": 0, "data", "len": 24576, "sha": 32 bytes} = a4 + 5 + 6 + 7 + 38 = 57 bytes: 2408;
    /// - a later request is 8 + 13 + 3 + 2451 = 2475 bytes: 5 Write Commands of 495 bytes (ATT_MTU − 3);
    /// - a chunk's flash: 613 words (2451 rounded up to words) × 41 µs = 25 133 µs;
    /// - the erase before the first chunk: 6 pages of the image and the trailer's page, 7 × 85 000 µs;
    /// - 24 576 − 2408 = 22 168 bytes after the first chunk: 9 full chunks of 2451 and a tail of 109.
    @Test func aVectorComputedByHand() throws {
        let profile = try BenchFamilyTests.profile("smp-sensor", as: SMPDeviceProfile.self)
        let bound = profile.smpBound(imageBytes: 24_576)
        #expect(bound.chunkBytes == 2451)
        #expect(bound.firstChunkBytes == 2408)
        #expect(bound.writesPerChunk == 5)
        #expect(bound.chunkFlashMicros == 25_133)
        let model = LinkModel(link: profile.link, flash: FlashParameters())
        // The answer {"rc": 0, "off": 24576} is 8 + 12 bytes: one notification of 23 ATT bytes.
        let chunkLink = 5 * model.writeCommandMicros(attBytes: 498) + model.writeCommandMicros(attBytes: 23)
        #expect(abs(bound.chunkLinkMicros - chunkLink) < 1e-6)
        // The first request: 8 + 56 + 3 + 2408 = 2475 bytes, 5 writes; then the erase and its own flash writes
        // (602 words).
        let firstLink = 5 * model.writeCommandMicros(attBytes: 498) + model.writeCommandMicros(attBytes: 23)
        let first = firstLink + 7 * 85_000 + 602 * 41
        #expect(abs(bound.firstChunkMicros - first) < 1e-6)
        let tailRequest = 8 + 13 + 2 + 109  // "data" with a 2-byte head
        let tailLink = model.writeCommandMicros(attBytes: tailRequest + 3) + model.writeCommandMicros(attBytes: 23)
        let tailFlash = Double((109 + 3) / 4) * 41
        let upload = first + 9 * max(chunkLink, 25_133) + max(tailLink, tailFlash)
        #expect(abs(bound.uploadMicros - upload) < 1e-6)
        #expect(abs(bound.bytesPerSecond - 24_576 * 1e6 / upload) < 1e-6)
        let serial = first + 9 * (chunkLink + 25_133) + tailLink + tailFlash
        #expect(abs(bound.oneAtATimeBytesPerSecond - 24_576 * 1e6 / serial) < 1e-6)
    }

    /// Pipelining never loses against one request at a time, on every SMP profile and size.
    @Test func pipelinedIsNeverBelowOneAtATime() throws {
        for name in ["smp-sensor", "smp-bracelet"] {
            let profile = try BenchFamilyTests.profile(name, as: SMPDeviceProfile.self)
            for size in [1, 100, 4096, 24_576, 131_072, 400_000] {
                for mtu in [23, 185, profile.link.maxMTU] {
                    let bound = profile.smpBound(imageBytes: size, mtu: mtu)
                    #expect(bound.bytesPerSecond >= bound.oneAtATimeBytesPerSecond, "\(name) \(size) B, MTU \(mtu)")
                    #expect(bound.bytesPerSecond > 0)
                }
            }
        }
    }

    /// A measured upload (the bench's pipelined default and the mcumgr CLI emulation, on a virtual device at
    /// speedup 20) never beats the bound of its own link and size.
    @Test func aMeasuredUploadStaysBelowTheBound() async throws {
        let profile = try BenchFamilyTests.profile("smp-bracelet", as: SMPDeviceProfile.self)
        let target = try BenchTarget.smp(profile, size: 16 * 1024, speedup: 20)
        let runs = await BenchFamilyTests.bench("smp-bracelet", target, modes: ["adaptive", "mcumgr-cli"])
        for run in runs {
            #expect(run.completed)
            #expect(run.bytesPerSecond <= run.protocolBoundBytesPerSecond, "\(run.mode): \(run.bytesPerSecond) B/s")
        }
    }
}
