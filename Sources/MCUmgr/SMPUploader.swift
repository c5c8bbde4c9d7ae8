import CBOR
import Crypto
import Logging
import Synchronization

/// Progress of an upload as the driver reports it.
public struct SMPUploadProgress: Hashable, Sendable, CustomStringConvertible {
    public var offset: Int
    public var total: Int
    /// Bytes per second confirmed since the start of this run (resumed bytes excluded).
    public var bytesPerSecond: Double
    public var window: Int

    public var percent: Int { total > 0 ? offset * 100 / total : 100 }

    public var description: String {
        "\(offset)/\(total) bytes (\(percent)%) \(Int(bytesPerSecond)) B/s, window \(window)"
    }
}

/// Runs ``SMPUploadStateMachine`` over an ``SMPClient``: the thin I/O half of the upload.
public actor SMPUploader {
    public let client: SMPClient
    private let logger: Logger
    private let now: @Sendable () -> Duration
    private nonisolated let stop = Mutex<AsyncStream<SMPUploadEvent>.Continuation?>(nil)
    private nonisolated let stopFlag = Mutex(false)

    public init(client: SMPClient, clock: some Clock<Duration> = ContinuousClock(), logger: Logger = Logger(label: "bledfu.smp.upload")) {
        self.client = client
        self.logger = logger
        let start = clock.now
        self.now = { start.duration(to: clock.now) }
    }

    /// The largest SMP packet the device takes: its buffer size when it told us (`mcumgr_params`; Zephyr then
    /// reassembles the write fragments), else one write of ATT_MTU − 3 (smp-mcuboot.md §14).
    public static func packetLimit(mtu: Int, parameters: SMPParameters?) -> Int {
        if let parameters { return parameters.bufferSize }
        return max(mtu - 3, 20)
    }

    /// Ends the upload in progress at once (the device keeps its offset: any point is a safe point for SMP).
    public nonisolated func requestStop() {
        stopFlag.withLock { $0 = true }
        _ = stop.withLock { $0?.yield(.stopRequested) }
    }

    /// Uploads `image`. `packetLimit` bounds each request (see ``packetLimit(mtu:parameters:)``).
    public func upload(
        _ image: [UInt8], configuration: SMPUploadConfiguration, packetLimit: Int,
        progress: (@Sendable (SMPUploadProgress) -> Void)? = nil
    ) async throws(SMPError) -> SMPUploadResult {
        let sha = Array(SHA256.hash(data: image))
        let upgrade: Bool? = configuration.upgrade ? true : nil
        let image0: Int? = configuration.image > 0 ? configuration.image : nil
        guard
            let first = SMPUploadChunk.maximumDataLength(
                packetLimit: packetLimit, totalLength: image.count, image: image0, sha: sha, upgrade: upgrade, first: true),
            let later = SMPUploadChunk.maximumDataLength(
                packetLimit: packetLimit, totalLength: image.count, image: nil, sha: nil, upgrade: nil, first: false)
        else {
            throw SMPError(.invalidArgument, "an SMP packet of \(packetLimit) bytes cannot carry an upload chunk")
        }
        var machine = SMPUploadStateMachine(
            image: image, sha: sha, configuration: configuration, firstDataLength: first, dataLength: later)
        let (events, continuation) = AsyncStream.makeStream(of: SMPUploadEvent.self)
        stop.withLock { $0 = continuation }
        defer {
            stop.withLock { $0 = nil }
            continuation.finish()
        }
        var pending: [SMPUploadEvent] = [.start]
        if stopFlag.withLock({ $0 }) { pending.append(.stopRequested) }
        var iterator = events.makeAsyncIterator()
        let started = now()
        var startOffset: Int?
        logger.debug("SMP upload", metadata: ["smp.bytes": "\(image.count)", "smp.chunk": "\(later)"])
        while true {
            let event: SMPUploadEvent
            if !pending.isEmpty {
                event = pending.removeFirst()
            } else if let next = await iterator.next() {
                event = next
            } else {
                throw SMPError(.closed, "upload ended")
            }
            if Task.isCancelled { throw SMPError(.cancelled, "upload cancelled at offset \(machine.acknowledged)") }
            for action in machine.handle(event) {
                switch action {
                case .send(let id, let chunk, let timeout):
                    do {
                        try await client.submit(.upload(chunk), timeout: timeout, retries: 0) { result in
                            continuation.yield(Self.event(for: id, result))
                        }
                    } catch {
                        pending.append(.failed(chunk: id, error))
                    }
                case .progress(let offset, let total):
                    if startOffset == nil { startOffset = offset }
                    let seconds = Self.seconds(now() - started)
                    let speed = seconds > 0 ? Double(offset - (startOffset ?? 0)) / seconds : 0
                    progress?(SMPUploadProgress(offset: offset, total: total, bytesPerSecond: speed, window: machine.window))
                case .completed(let result):
                    logger.debug("SMP upload complete", metadata: ["smp.resent": "\(result.chunksResent)"])
                    return result
                case .failed(let error):
                    logger.debug("SMP upload failed", metadata: ["smp.error": "\(error)"])
                    throw error
                }
            }
        }
    }

    static func event(for id: Int, _ result: Result<SMPMessage, SMPError>) -> SMPUploadEvent {
        switch result {
        case .failure(let error): return .failed(chunk: id, error)
        case .success(let message):
            let status = SMPStatus(body: message.body)
            guard status == .ok else { return .failed(chunk: id, .remote(status, request: "image upload")) }
            do {
                return .answered(chunk: id, try SMPUploadResponse(body: message.body ?? .map([])))
            } catch {
                return .failed(chunk: id, error)
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
