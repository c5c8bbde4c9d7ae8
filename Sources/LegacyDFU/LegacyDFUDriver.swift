import Logging
import Synchronization

/// Progress of a Legacy transfer as the driver reports it.
public struct LegacyProgressReport: Hashable, Sendable, CustomStringConvertible {
    public var partIndex: Int
    public var partCount: Int
    public var progress: LegacyProgress
    /// Bytes per second confirmed since the start of this attempt.
    public var bytesPerSecond: Double

    public init(partIndex: Int, partCount: Int, progress: LegacyProgress, bytesPerSecond: Double) {
        self.partIndex = partIndex
        self.partCount = partCount
        self.progress = progress
        self.bytesPerSecond = bytesPerSecond
    }

    public var description: String {
        "part \(partIndex + 1)/\(partCount) \(progress.bytesConfirmed)/\(progress.totalBytes) bytes (\(progress.percent)%) "
            + "\(Int(bytesPerSecond)) B/s"
    }
}

/// Runs ``LegacyDFUStateMachine`` over a ``LegacyDFUTransport``: the thin I/O half of the Legacy engine. One driver
/// serves one connection (one attempt at one part: each part needs a bootloader session of its own).
public actor LegacyDFUDriver<C: Clock<Duration>> {
    public nonisolated let progress: AsyncStream<LegacyProgressReport>
    private let progressContinuation: AsyncStream<LegacyProgressReport>.Continuation
    private let transport: any LegacyDFUTransport
    private let clock: C
    private let logger: Logger
    /// The settings; after a run its pacing is what the run learned (carry it into the next attempt).
    public private(set) var configuration: LegacyDFUConfiguration
    /// Firmware bytes the last run sent (what a restart sends again).
    public private(set) var bytesSent = 0
    /// The window (packets) the last run was sending, nil when streaming.
    public private(set) var lastWindow: Int?

    public init(
        transport: any LegacyDFUTransport, clock: C, configuration: LegacyDFUConfiguration = LegacyDFUConfiguration(),
        logger: Logger = Logger(label: "bledfu.legacy")
    ) {
        (progress, progressContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
        self.transport = transport
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    /// The pacing after the last run.
    public var pacing: any LegacyPacingPolicy { configuration.pacing }

    /// Ends the ``progress`` stream.
    public func finish() { progressContinuation.finish() }

    /// Sends one part: returns once the device acknowledged Activate and Reset (it installs the image and resets).
    /// A failure whose ``LegacyDFUError/restartsFromZero`` is true means: connect again and run the part again
    /// (Legacy DFU cannot resume inside an image). Cancelling the calling task throws ``LegacyDFUError/Code/cancelled``.
    public func run(part: LegacyPart, partIndex: Int = 0, partCount: Int = 1) async throws(LegacyDFUError) {
        var machine = LegacyDFUStateMachine(part: part, configuration: configuration)
        let (inbox, continuation) = AsyncStream.makeStream(of: LegacyDFUEvent.self)
        let notifications = transport.controlPointNotifications
        let forwarder = Task {
            for await bytes in notifications { continuation.yield(.notification(bytes)) }
            continuation.yield(.disconnected)
        }
        var timerTask: Task<Void, Never>?
        defer {
            forwarder.cancel()
            timerTask?.cancel()
            continuation.finish()
            configuration = machine.configuration
            bytesSent = machine.sentOffset
            lastWindow = machine.window
        }
        let start = clock.now
        var pending: [LegacyDFUEvent] = [.started]
        var iterator = inbox.makeAsyncIterator()
        var logger = self.logger
        logger[metadataKey: "dfu.part"] = "\(partIndex)"
        while true {
            var event: LegacyDFUEvent
            if !pending.isEmpty {
                event = pending.removeFirst()
            } else if let next = await iterator.next() {
                event = next
            } else {
                event = .disconnected
            }
            if Task.isCancelled { event = .cancelled }
            actions: for action in machine.handle(event) {
                switch action {
                case .writeControlPoint(let request):
                    logger.debug("control point request", metadata: ["dfu.request": "\(request)"])
                    do {
                        try await transport.writeControlPoint(request.encoded)
                    } catch {
                        // Reset: the device resets anyway; otherwise what follows depended on the write.
                        if request == .reset { continue }
                        logger.debug("control point write failed", metadata: ["dfu.error": "\(error)"])
                        pending.append(.requestNotAcknowledged)
                        break actions
                    }
                case .writePacket(let bytes):
                    do {
                        try await transport.writePacket(bytes)
                    } catch {
                        pending.append(.disconnected)
                        break actions
                    }
                case .sendPackets(let burst):
                    let bytes = burst.source == .initPacket ? part.initPacket : part.image
                    logger.trace("packets", metadata: ["dfu.offset": "\(burst.span.lowerBound)", "dfu.packets": "\(burst.packets.count)"])
                    do {
                        try await transport.writePackets(burst.packets.map { bytes[$0] })
                        pending.append(.packetsSent)
                    } catch {
                        pending.append(.disconnected)
                        break actions
                    }
                case .startTimer(let timer, let duration):
                    timerTask?.cancel()
                    timerTask = Task { [clock] in
                        do {
                            try await clock.sleep(for: duration, tolerance: nil)
                        } catch {
                            return
                        }
                        continuation.yield(.timerFired(timer))
                    }
                case .progress(let progress):
                    let elapsed = start.duration(to: clock.now)
                    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                    progressContinuation.yield(
                        LegacyProgressReport(
                            partIndex: partIndex, partCount: partCount, progress: progress,
                            bytesPerSecond: seconds > 0 ? Double(progress.bytesConfirmed) / seconds : 0))
                case .completed:
                    logger.debug("part activated")
                    return
                case .failed(let error):
                    logger.debug("transfer failed", metadata: ["dfu.error": "\(error)"])
                    throw error
                }
            }
        }
    }
}
