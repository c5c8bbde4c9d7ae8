import MCUmgr
import Testing

/// The window of chunks in flight (``SMPWindowPolicy``) and the first chunk, against a scripted device that takes
/// chunks at its offset and answers in order (img_mgmt_upload), dropping the requests it is told to drop.
@Suite(.timeLimit(.minutes(5))) struct SMPWindowPolicyTests {
    struct Device {
        var machine: SMPUploadStateMachine
        var offset = 0
        var queue: [(id: Int, chunk: SMPUploadChunk)] = []
        var sent: [SMPUploadChunk] = []
        var windows: [Int] = []
        var inFlightPeak = 0
        var result: SMPUploadResult?

        init(size: Int, configuration: SMPUploadConfiguration, held: Int = 0) {
            let image = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            machine = SMPUploadStateMachine(
                image: image, sha: [UInt8](repeating: 0xCD, count: 32), configuration: configuration, firstDataLength: 1000,
                dataLength: 1000)
            offset = held
            take(machine.handle(.start))
        }

        mutating func take(_ actions: [SMPUploadAction]) {
            for action in actions {
                switch action {
                case .send(let id, let chunk, _):
                    queue.append((id, chunk))
                    sent.append(chunk)
                case .completed(let done): result = done
                case .failed(let error): Issue.record("the upload failed: \(error)")
                case .progress: break
                }
            }
            inFlightPeak = max(inFlightPeak, queue.count)
            windows.append(machine.window)
        }

        /// Answers the oldest request; `drop`: loses it (the device never saw it) and reports its timeout instead.
        mutating func step(drop: Bool = false, timeout: Bool = false) {
            guard !queue.isEmpty else { return }
            let (id, chunk) = queue.removeFirst()
            if drop {
                if timeout { take(machine.handle(.failed(chunk: id, SMPError(.timeout, "no answer")))) }
                return
            }
            if chunk.offset == 0, offset > 0 {
                // resume: a held upload of the same sha; the first chunk is not written
            } else if chunk.offset == offset {
                offset += chunk.data.count
            }
            take(machine.handle(.answered(chunk: id, SMPUploadResponse(offset: offset))))
        }

        mutating func finish() {
            var steps = 0
            while result == nil, !queue.isEmpty, steps < 10_000 {
                steps += 1
                step()
            }
        }
    }

    /// Adaptive: a lost request (the next one answered with the offset before the gap) halves the window of 3 to 1;
    /// the lost chunk's slot is free at once (the device answers in order: it will never be answered), so the upload
    /// goes on without its timeout (this device never reports one); clean answers grow the window back to 3.
    @Test func adaptiveFallsToOneAndGrowsBack() {
        var device = Device(size: 40_000, configuration: SMPUploadConfiguration(window: 3, policy: .adaptive))
        device.step()  // the first chunk
        #expect(device.machine.window == 3 && device.queue.count == 3)
        device.step(drop: true)
        device.step()  // answered with the offset of the dropped chunk: a gap
        #expect(device.machine.window == 1)
        device.finish()
        #expect(device.result != nil)
        #expect(device.windows.last == 3, "\(device.windows)")
        #expect(device.windows.contains(2))
    }

    /// newtmgr (`mcumgr-cli`): one chunk first, one more per answer up to 5; a timed-out chunk while more than two
    /// are in flight takes one away, and the window never grows again.
    @Test func newtmgrStartsAtOneAndGrowsPerAnswer() {
        var device = Device(size: 60_000, configuration: SMPUploadConfiguration(window: 5, policy: .newtmgr))
        #expect(device.machine.window == 1 && device.queue.count == 1)
        for expected in 2...5 {
            device.step()
            #expect(device.machine.window == expected)
        }
        device.step()
        #expect(device.machine.window == 5 && device.queue.count == 5)
        device.step(drop: true, timeout: true)
        #expect(device.machine.window == 4)
        device.finish()
        #expect(device.result != nil)
        #expect(device.windows.suffix(10).allSatisfy { $0 == 4 }, "\(device.windows)")
        #expect(device.inFlightPeak == 5)
    }

    /// A fixed window (`nordic`, `window:N`) stays as it is through a loss.
    @Test func fixedStays() {
        var device = Device(size: 20_000, configuration: SMPUploadConfiguration(window: 3, policy: .fixed))
        device.step()
        device.step(drop: true)
        device.step()
        device.finish()
        #expect(device.result != nil)
        #expect(Set(device.windows) == [3])
    }

    /// A minimal first chunk (bledfu's modes): a resume costs the 32-byte first chunk and nothing else; a fresh upload
    /// sends every byte once.
    @Test func minimalFirstChunk() throws {
        let minimal = SMPUploadConfiguration(window: 3, policy: .adaptive, firstChunkBytes: SMPUploadConfiguration.minimalFirstChunk)
        var resumed = Device(size: 20_000, configuration: minimal, held: 12_000)
        #expect(resumed.sent.first?.data.count == 32)
        resumed.finish()
        let result = try #require(resumed.result)
        #expect(result.startOffset == 12_000 && result.bytesResent == 32, "\(result)")
        var fresh = Device(size: 20_000, configuration: minimal)
        fresh.finish()
        #expect(fresh.result?.bytesSent == 20_000 && fresh.result?.bytesResent == 0)
        // The host emulations send as much as fits: 1000 bytes of the held upload go for nothing.
        var emulated = Device(size: 20_000, configuration: SMPUploadConfiguration(window: 1, policy: .fixed), held: 12_000)
        emulated.finish()
        #expect(emulated.result?.bytesResent == 1000)
    }

    /// The modes as `--mode` names them (docs/smp.md): what each sends and how its window moves.
    @Test func modes() throws {
        let parameters = SMPParameters(bufferSize: 2475, bufferCount: 4)
        let adaptive = try #require(SMPPacing.configuration("adaptive", parameters: parameters, mtu: 498))
        #expect(adaptive.upload.window == 3 && adaptive.upload.policy == .adaptive && adaptive.upload.firstChunkBytes == 32)
        #expect(adaptive.packetLimit == 2475)
        let cli = try #require(SMPPacing.configuration("mcumgr-cli", parameters: parameters, mtu: 498))
        #expect(cli.upload.window == 5 && cli.upload.policy == .newtmgr && cli.upload.firstChunkBytes == nil)
        #expect(cli.packetLimit == 495)
        #expect(try #require(SMPPacing.configuration("mcumgr-cli", parameters: parameters, mtu: 1024)).packetLimit == 512)
        let nordic = try #require(SMPPacing.configuration("nordic", parameters: parameters, mtu: 498))
        #expect(nordic.upload.window == 1 && nordic.upload.policy == .fixed && nordic.packetLimit == 2475)
        let pipelined = try #require(SMPPacing.configuration("nordic:4", parameters: parameters, mtu: 498))
        #expect(pipelined.upload.window == 4 && pipelined.upload.policy == .fixed && pipelined.upload.firstChunkBytes == nil)
        let window = try #require(SMPPacing.configuration("window:6", parameters: parameters, mtu: 498))
        #expect(window.upload.window == 6 && window.upload.firstChunkBytes == 32)
        for bad in ["nordic:0", "nordic:33", "window:x", "mcumgr"] {
            #expect(SMPPacing.configuration(bad, parameters: parameters, mtu: 498) == nil, "\(bad)")
        }
    }
}
