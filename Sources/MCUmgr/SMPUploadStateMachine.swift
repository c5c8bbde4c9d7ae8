import BLECore

/// How the number of chunks in flight changes during an upload.
public enum SMPWindowPolicy: String, Hashable, Sendable {
    /// bledfu's: start at the window, halve it on every loss (down to one at a time), grow it back by one after
    /// twice the window of clean answers.
    case adaptive
    /// The window throughout (Nordic's libraries: iOS `pipelineDepth`, Android `windowCapacity`).
    case fixed
    /// newtmgr / mcumgr-cli (`nmxact/xact/image.go`, smp-mcuboot.md §11): start at one chunk
    /// (IMAGE_UPLOAD_START_WS), one more after every answer up to the window (`-w`, default 5); a failed chunk (a
    /// timeout) takes one away while more than two are in flight and stops the growth for the rest of the upload.
    case newtmgr
}

/// How an upload paces itself.
public struct SMPUploadConfiguration: Hashable, Sendable {
    /// Most chunks in flight. Nordic's libraries keep at most the device's buffer count minus one (one buffer
    /// stays free for the response, Android-nRF-Connect-Device-Manager #72); 1 is one chunk at a time
    /// (smp-mcuboot.md §10, §11). With ``SMPWindowPolicy/newtmgr`` the most it grows to.
    public var window: Int
    /// How the window changes (``SMPWindowPolicy``).
    public var policy: SMPWindowPolicy
    /// Data bytes of the first chunk (nil: as many as fit, as the host emulations send it). The first chunk goes
    /// alone, and when the device already holds part of an upload of the same image (a resume after a lost link, a
    /// killed tool, another station) it answers with its offset without writing the chunk: a minimal first chunk
    /// (``minimalFirstChunk``, the 32-byte MCUboot header img_mgmt needs) keeps what is sent twice on a resume to the
    /// chunks that were in flight, at most one window.
    public var firstChunkBytes: Int?
    /// Halve the window on every loss and grow it back (``SMPWindowPolicy/adaptive``).
    public var adaptive: Bool { policy == .adaptive }
    /// The first chunk may erase the whole slot first: hosts give it 30-40 s (Android PR #71, iOS PR #104).
    public var firstChunkTimeout: Duration
    /// Later chunks (Android 2.5 s, iOS 10 s).
    public var chunkTimeout: Duration
    /// Losses (timeouts, gaps) in a row before the upload gives up (Android MAX_CHUNK_FAILURES 5).
    public var maximumFailures: Int
    /// Times the device may forget the upload (answer `off` 0 again) before the upload gives up.
    public var maximumRestarts: Int
    /// Send `upgrade: true`: the device refuses an image not newer than the running one.
    public var upgrade: Bool
    /// Image number (0 application; 1 the nRF5340 network core).
    public var image: Int

    /// The smallest first chunk img_mgmt takes: an MCUboot image header (`img_mgmt_upload_inspect`; newtmgr's
    /// IMAGE_UPLOAD_MIN_1ST_CHUNK).
    public static let minimalFirstChunk = 32

    public init(
        window: Int = 3, adaptive: Bool = true, firstChunkTimeout: Duration = .seconds(40),
        chunkTimeout: Duration = .seconds(5), maximumFailures: Int = 5, maximumRestarts: Int = 2, upgrade: Bool = false,
        image: Int = 0, policy: SMPWindowPolicy? = nil, firstChunkBytes: Int? = nil
    ) {
        self.window = window
        self.policy = policy ?? (adaptive ? .adaptive : .fixed)
        self.firstChunkBytes = firstChunkBytes
        self.firstChunkTimeout = firstChunkTimeout
        self.chunkTimeout = chunkTimeout
        self.maximumFailures = maximumFailures
        self.maximumRestarts = maximumRestarts
        self.upgrade = upgrade
        self.image = image
    }
}

/// What an upload did.
public struct SMPUploadResult: Hashable, Sendable, Codable {
    /// Where the device's upload stood when this run started (a resume starts above 0).
    public var startOffset: Int
    public var totalBytes: Int
    /// Data bytes sent, duplicates included.
    public var bytesSent: Int
    /// Chunks sent again after a loss, a gap or a timeout.
    public var chunksResent: Int
    /// The device's `match` on the last chunk, when it checks the image.
    public var match: Bool?

    /// Data bytes sent more than once.
    public var bytesResent: Int { max(0, bytesSent - (totalBytes - startOffset)) }
}

/// Events for ``SMPUploadStateMachine``. A chunk is named by the id its `.send` action gave it.
public enum SMPUploadEvent: Hashable, Sendable {
    case start
    case answered(chunk: Int, SMPUploadResponse)
    /// The chunk failed: a timeout, a device error, the link.
    case failed(chunk: Int, SMPError)
    case stopRequested
}

public enum SMPUploadAction: Hashable, Sendable {
    case send(chunk: Int, SMPUploadChunk, timeout: Duration)
    /// The device confirmed `offset` of `total` bytes.
    case progress(offset: Int, total: Int)
    case completed(SMPUploadResult)
    case failed(SMPError)
}

/// The upload of one image over one connection, as a value (smp-mcuboot.md §4): events in, actions out, no I/O.
///
/// - The first chunk (`off` 0) carries `len`, `sha` (SHA-256 of the image) and `upgrade`, and goes alone with the
///   long timeout: the device may erase the slot before answering. Its answer is where the device's upload stands:
///   a device that holds part of an upload with the same `sha` answers its offset, and the upload resumes there
///   (`img_mgmt_upload_inspect`: same `sha` → resume).
/// - Then up to `window` chunks are in flight. Every answer is the offset the device expects next; a chunk at
///   another offset is dropped by the device and answered with the offset it expects (no error), so an answer
///   below the chunk's end is a gap: the chunks in flight are then stale, and sending resumes at the device's
///   offset (one rewind per loss: answers to stale chunks do not rewind again). At most one window is sent twice
///   per loss.
/// - The device answers in the order it processes requests, so its offsets never go down, except to 0 when it
///   forgot the upload (a reset; the upload then starts over, a bounded number of times). An offset below the one
///   already confirmed, past the image's end or past what was sent is a lie: the upload fails.
/// - The answer that reaches `len` ends the upload; `match: false` there fails it.
public struct SMPUploadStateMachine: Sendable {
    public let image: [UInt8]
    public let sha: [UInt8]
    public let configuration: SMPUploadConfiguration
    /// Data bytes per chunk: the first chunk (with `len`, `sha`, `upgrade`) and the others.
    public let firstDataLength: Int
    public let dataLength: Int

    struct Chunk: Hashable, Sendable {
        var offset: Int
        var length: Int
        var epoch: Int
        var end: Int { offset + length }
    }

    enum Phase: Hashable, Sendable { case idle, first, streaming, finished }

    var phase = Phase.idle
    var inFlight: [Int: Chunk] = [:]
    var nextID = 0
    var epoch = 0
    /// The device's confirmed offset.
    public private(set) var acknowledged = 0
    var nextOffset = 0
    var highestSent = 0
    public private(set) var window: Int
    /// newtmgr grows its window until the first failed chunk.
    var growing = true
    var cleanAnswers = 0
    var failuresInARow = 0
    var restarts = 0
    var startOffset: Int?
    var bytesSent = 0
    var chunksResent = 0

    public init(image: [UInt8], sha: [UInt8], configuration: SMPUploadConfiguration, firstDataLength: Int, dataLength: Int) {
        self.image = image
        self.sha = sha
        self.configuration = configuration
        self.firstDataLength = max(1, min(firstDataLength, configuration.firstChunkBytes ?? firstDataLength))
        self.dataLength = max(1, dataLength)
        self.window = configuration.policy == .newtmgr ? 1 : max(1, configuration.window)
    }

    public var isFinished: Bool { phase == .finished }
    var total: Int { image.count }

    public mutating func handle(_ event: SMPUploadEvent) -> [SMPUploadAction] {
        guard phase != .finished else { return [] }
        switch event {
        case .start:
            guard phase == .idle else { return [] }
            guard !image.isEmpty else { return fail(SMPError(.invalidArgument, "empty image")) }
            return sendFirst()
        case .stopRequested:
            return fail(SMPError(.stopped, "stopped at offset \(acknowledged) of \(total) (resumable)"))
        case .answered(let id, let response):
            guard let chunk = inFlight.removeValue(forKey: id) else { return [] }
            return answered(chunk, response)
        case .failed(let id, let error):
            guard let chunk = inFlight.removeValue(forKey: id) else { return [] }
            return chunkFailed(chunk, error)
        }
    }

    // MARK: - Answers

    mutating func answered(_ chunk: Chunk, _ response: SMPUploadResponse) -> [SMPUploadAction] {
        let offset = response.offset
        guard offset <= total else {
            return fail(SMPError(.protocolViolation, "device answered offset \(offset), past the image's end (\(total))"))
        }
        if phase == .first || chunk.offset == 0 {
            // The answer to a first chunk says where the device's upload stands. At the chunk's own end the device
            // wrote it: a fresh upload, started at 0. Any other offset is a held upload with the same sha, resumed
            // there; the first chunk's data was not written (img_mgmt_upload_inspect), so it counts as resent.
            if startOffset == nil { startOffset = offset == chunk.end ? 0 : offset }
            acknowledged = offset
            phase = .streaming
        } else {
            guard offset <= highestSent else {
                return fail(SMPError(.protocolViolation, "device answered offset \(offset), beyond the \(highestSent) bytes sent"))
            }
            if offset < acknowledged {
                guard offset == 0 else {
                    return fail(SMPError(.protocolViolation, "device offset went backwards from \(acknowledged) to \(offset)"))
                }
                return restart("the device forgot the upload (answered offset 0 at \(acknowledged))")
            }
        }
        acknowledged = max(acknowledged, offset)
        highestSent = max(highestSent, offset)
        var actions: [SMPUploadAction] = [.progress(offset: acknowledged, total: total)]
        if acknowledged == total {
            phase = .finished
            if response.match == false {
                return actions + [.failed(SMPError(.imageMismatch, "the device reports that the uploaded image does not match its SHA-256"))]
            }
            let result = SMPUploadResult(
                startOffset: startOffset ?? 0, totalBytes: total, bytesSent: bytesSent, chunksResent: chunksResent,
                match: response.match)
            return actions + [.completed(result)]
        }
        if chunk.offset != 0, offset < chunk.end, chunk.epoch == epoch {
            // A gap: an earlier chunk was lost; what is in flight is stale. The device answers in the order it takes
            // requests, so the chunks sent before this one and still unanswered will never be answered (the request
            // or its answer was lost): their slots are free now, not after their timeouts.
            let lostBefore = chunk.offset
            inFlight = inFlight.filter { $0.value.epoch != chunk.epoch || $0.value.offset > lostBefore }
            actions += loss(rewindTo: offset)
            if case .failed = actions.last { return actions }
            // newtmgr counts every response, a repeated offset too (HandleResponse).
            if configuration.policy == .newtmgr { grow() }
        } else if offset >= chunk.end {
            failuresInARow = 0
            grow()
        }
        if nextOffset < acknowledged { nextOffset = acknowledged }
        return actions + fill()
    }

    mutating func chunkFailed(_ chunk: Chunk, _ error: SMPError) -> [SMPUploadAction] {
        switch error.code {
        case .timeout:
            break
        case .remote where error.returnCode == .busy || error.returnCode == .noMemory:
            break  // transient: the device had no buffer or was busy (iOS retries on busy; Android #19)
        default:
            return fail(error)
        }
        if chunk.end <= acknowledged { return fill() }
        if chunk.offset == 0 && acknowledged == 0 {
            failuresInARow += 1
            guard failuresInARow < configuration.maximumFailures else { return fail(gaveUp(error)) }
            return sendFirst()
        }
        if configuration.policy == .newtmgr {
            // HandleError: one slot less while more than two were in flight (the failed one included); no growth.
            if inFlight.count + 1 > 2 { window = max(1, window - 1) }
            growing = false
        }
        guard chunk.epoch == epoch else { return fill() }
        let actions = loss(rewindTo: acknowledged, cause: error)
        if case .failed = actions.last { return actions }
        return actions + fill()
    }

    mutating func loss(rewindTo offset: Int, cause: SMPError? = nil) -> [SMPUploadAction] {
        failuresInARow += 1
        guard failuresInARow < configuration.maximumFailures else {
            return fail(gaveUp(cause ?? SMPError(.timeout, "chunks lost at offset \(offset)")))
        }
        epoch += 1
        nextOffset = offset
        cleanAnswers = 0
        if configuration.adaptive { window = max(1, window / 2) }
        return []
    }

    func gaveUp(_ cause: SMPError) -> SMPError {
        SMPError(
            cause.code == .remote ? .remote : .timeout,
            "\(configuration.maximumFailures) losses in a row at offset \(acknowledged) of \(total): \(cause.reason)",
            returnCode: cause.returnCode, groupError: cause.groupError)
    }

    mutating func grow() {
        guard window < configuration.window else { return }
        if configuration.policy == .newtmgr {
            if growing { window += 1 }
            return
        }
        guard configuration.adaptive else { return }
        cleanAnswers += 1
        if cleanAnswers >= window * 2 {
            window += 1
            cleanAnswers = 0
        }
    }

    mutating func restart(_ why: String) -> [SMPUploadAction] {
        restarts += 1
        guard restarts <= configuration.maximumRestarts else {
            return fail(SMPError(.protocolViolation, "\(why), \(restarts) times"))
        }
        epoch += 1
        acknowledged = 0
        nextOffset = 0
        highestSent = 0
        return sendFirst()
    }

    // MARK: - Sending

    mutating func sendFirst() -> [SMPUploadAction] {
        phase = .first
        epoch += 1
        let length = min(firstDataLength, total)
        return [send(Chunk(offset: 0, length: length, epoch: epoch), timeout: configuration.firstChunkTimeout)]
    }

    /// Sends chunks from `nextOffset` while the window has room.
    mutating func fill() -> [SMPUploadAction] {
        guard phase == .streaming else { return [] }
        var actions: [SMPUploadAction] = []
        if inFlight.isEmpty, nextOffset >= total, acknowledged < total {
            // Everything was answered, some of it stale: send again from the device's offset.
            nextOffset = acknowledged
        }
        while inFlight.count < window, nextOffset < total {
            if nextOffset == 0 { return actions + sendFirst() }
            let length = min(dataLength, total - nextOffset)
            let chunk = Chunk(offset: nextOffset, length: length, epoch: epoch)
            nextOffset += length
            actions.append(send(chunk, timeout: configuration.chunkTimeout))
        }
        return actions
    }

    mutating func send(_ chunk: Chunk, timeout: Duration) -> SMPUploadAction {
        nextID += 1
        inFlight[nextID] = chunk
        bytesSent += chunk.length
        if chunk.offset < highestSent { chunksResent += 1 }
        highestSent = max(highestSent, chunk.end)
        let data = image[chunk.offset..<chunk.end]
        let request: SMPUploadChunk
        if chunk.offset == 0 {
            request = SMPUploadChunk(
                image: configuration.image > 0 ? configuration.image : nil, offset: 0, data: data, length: total,
                sha: sha, upgrade: configuration.upgrade ? true : nil)
        } else {
            request = SMPUploadChunk(offset: chunk.offset, data: data)
        }
        return .send(chunk: nextID, request, timeout: timeout)
    }

    mutating func fail(_ error: SMPError) -> [SMPUploadAction] {
        phase = .finished
        return [.failed(error)]
    }
}
