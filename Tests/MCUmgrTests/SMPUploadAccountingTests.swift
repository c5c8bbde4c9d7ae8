import MCUmgr
import Testing

/// What ``SMPUploadResult`` counts as resent (issue 16's bench; issue 18 session 6): a clean upload resends nothing.
/// Before, the answer to the first chunk (the device's offset after writing it) was taken as where the upload
/// started, so every clean upload reported its first chunk as resent (2406-2408 bytes with 2475-byte buffers, in
/// `bledfu bench` and in the VM test's "66300 bytes sent ... 2406 resent").
@Suite(.timeLimit(.minutes(5))) struct SMPUploadAccountingTests {
    /// Plays a device that takes every chunk at its offset (img_mgmt_upload: `off` is the next expected offset) and
    /// answers in order; returns the upload's result. `held` is the offset of an upload the device already holds with
    /// the same sha (img_mgmt_upload_inspect: the first chunk is then not written, the answer names the held offset).
    static func upload(size: Int, window: Int, held: Int = 0) throws -> SMPUploadResult {
        let image = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var machine = SMPUploadStateMachine(
            image: image, sha: [UInt8](repeating: 0xAB, count: 32),
            configuration: SMPUploadConfiguration(window: window, adaptive: false), firstDataLength: 1000,
            dataLength: 1200)
        var deviceOffset = 0
        var queue: [(Int, SMPUploadChunk)] = []
        func take(_ actions: [SMPUploadAction]) throws -> SMPUploadResult? {
            for action in actions {
                switch action {
                case .send(let id, let chunk, _): queue.append((id, chunk))
                case .completed(let result): return result
                case .failed(let error): throw error
                case .progress: break
                }
            }
            return nil
        }
        if let done = try take(machine.handle(.start)) { return done }
        var answers = 0
        while !queue.isEmpty, answers < 1000 {
            answers += 1
            let (id, chunk) = queue.removeFirst()
            if chunk.offset == 0, held > 0 {
                deviceOffset = held  // resume: the first chunk's data is not written
            } else if chunk.offset == deviceOffset {
                deviceOffset += chunk.data.count
            }
            if let done = try take(machine.handle(.answered(chunk: id, SMPUploadResponse(offset: deviceOffset)))) {
                return done
            }
        }
        throw SMPError(.timeout, "the upload did not end")
    }

    @Test(arguments: [1, 3])
    func aCleanUploadResendsNothing(window: Int) throws {
        let result = try Self.upload(size: 5_000, window: window)
        // 1000 (first chunk, with len and sha) + 1200 + 1200 + 1200 + 400.
        #expect(result.startOffset == 0)
        #expect(result.bytesSent == 5_000)
        #expect(result.chunksResent == 0)
        #expect(result.bytesResent == 0)
    }

    @Test func aResumeCountsOnlyTheFirstChunkItDidNotUse() throws {
        let result = try Self.upload(size: 5_000, window: 1, held: 2_600)
        // The device held 2600 bytes: the first chunk (1000 bytes) went for nothing, then 2600..<5000 (2400).
        #expect(result.startOffset == 2_600)
        #expect(result.bytesSent == 1_000 + 2_400)
        #expect(result.bytesResent == 1_000)
    }
}
