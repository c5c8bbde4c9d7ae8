import DFUProtocol
import Logging

/// Progress of a transfer as the driver reports it: the engine's counters plus part numbers and speed.
public struct DFUProgressReport: Hashable, Sendable, CustomStringConvertible {
    public var partIndex: Int
    public var partCount: Int
    public var progress: DFUProgress
    /// Bytes per second confirmed since the start of this run (resumed bytes excluded).
    public var bytesPerSecond: Double

    public init(partIndex: Int, partCount: Int, progress: DFUProgress, bytesPerSecond: Double) {
        self.partIndex = partIndex
        self.partCount = partCount
        self.progress = progress
        self.bytesPerSecond = bytesPerSecond
    }

    public var description: String {
        "part \(partIndex + 1)/\(partCount) object \(progress.objectIndex + 1)/\(progress.objectCount) "
            + "\(progress.bytesConfirmed)/\(progress.totalBytes) bytes (\(progress.percent)%) "
            + "\(Int(bytesPerSecond)) B/s, \(progress.retries) retries, \(progress.bytesResent) bytes resent"
    }
}

/// Runs ``SecureDFUStateMachine`` over a ``DFUTransport``: the thin I/O half of the engine.
public actor SecureDFUDriver<C: Clock<Duration>> {
    public nonisolated let progress: AsyncStream<DFUProgressReport>
    private let progressContinuation: AsyncStream<DFUProgressReport>.Continuation
    private let transport: any DFUTransport
    private let clock: C
    private let configuration: SecureDFUConfiguration
    private let journalStore: (any JournalStore)?
    private let logger: Logger
    /// The inbox of the run in progress; notifications between runs are dropped.
    private var currentInbox: AsyncStream<DFUEvent>.Continuation?
    private var forwarder: Task<Void, Never>?
    private var linkDown = false
    private var stopRequested = false

    public init(
        transport: any DFUTransport, clock: C, configuration: SecureDFUConfiguration = SecureDFUConfiguration(),
        journalStore: (any JournalStore)? = nil, logger: Logger = Logger(label: "bledfu.engine")
    ) {
        (progress, progressContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
        self.transport = transport
        self.clock = clock
        self.configuration = configuration
        self.journalStore = journalStore
        self.logger = logger
    }

    deinit { forwarder?.cancel() }

    /// Ends the ``progress`` stream (call after the last part).
    public func finish() { progressContinuation.finish() }

    /// Control Point notifications go to whichever run is in progress, so that several runs can share one
    /// connection (a notification stream has a single consumer).
    private func startForwarding() {
        guard forwarder == nil else { return }
        let notifications = transport.controlPointNotifications
        forwarder = Task { [weak self] in
            for await bytes in notifications { await self?.deliver(.controlPointNotification(bytes)) }
            await self?.linkEnded()
        }
    }

    private func deliver(_ event: DFUEvent) { currentInbox?.yield(event) }

    /// Asks the run in progress (or the next run) to stop at the next safe point: after the object being sent is
    /// executed and journaled. The run then throws ``DFUEngineError/Code/stopped``; the device is not sent Abort, so a
    /// later run (a new driver, the same journal) continues from there. Cancelling the task instead stops at once.
    public func requestStop() {
        stopRequested = true
        currentInbox?.yield(.stopRequested)
    }

    private func linkEnded() {
        linkDown = true
        currentInbox?.yield(.disconnected)
    }

    /// Sends one part over the current connection. Returns the journal as updated (if one was given).
    /// Cancelling the calling task sends Abort only when the configuration asks for it (`abortOnCancel`), and throws
    /// ``DFUEngineError/Code/cancelled``; ``requestStop()`` ends it at the next safe point instead. Runs on one driver
    /// are sequential; a new connection needs a new driver (its transport's notification stream ends with the link).
    @discardableResult
    public func run(part: DFUPart, partIndex: Int = 0, partCount: Int = 1, journal: DFUJournal? = nil)
        async throws(DFUEngineError) -> DFUJournal?
    {
        var configuration = self.configuration
        var journal = journal
        if let journal, journal.partIndex == partIndex { configuration.executedOffset = journal.executedOffset }
        var machine = SecureDFUStateMachine(part: part, configuration: configuration)
        let (inbox, inboxContinuation) = AsyncStream.makeStream(of: DFUEvent.self)
        currentInbox = inboxContinuation
        startForwarding()
        var timerTask: Task<Void, Never>?
        defer {
            currentInbox = nil
            timerTask?.cancel()
            inboxContinuation.finish()
        }
        let start = clock.now
        var startBytes: Int?
        var pending: [DFUEvent] = linkDown ? [.disconnected] : [.started(mtu: await transport.mtu)]
        if stopRequested { pending.insert(.stopRequested, at: 0) }
        var iterator = inbox.makeAsyncIterator()
        var logger = self.logger
        logger[metadataKey: "dfu.part"] = "\(partIndex)"

        while true {
            var event: DFUEvent
            if !pending.isEmpty {
                event = pending.removeFirst()
            } else if let next = await iterator.next() {
                event = next
            } else {
                event = .disconnected
            }
            if Task.isCancelled { event = .cancelled }
            for action in machine.handle(event) {
                switch action {
                case .writeControlPoint(let request):
                    logger.debug("control point request", metadata: ["dfu.request": "\(request)"])
                    do {
                        try await transport.writeControlPoint(request.encoded)
                    } catch {
                        if request == .abort { break }  // The device resets on Abort; a failed write changes nothing.
                        logger.debug("control point write failed", metadata: ["dfu.error": "\(error)"])
                        pending.append(.requestNotAcknowledged)
                    }
                case .sendPackets(let burst):
                    let bytes = burst.source == .initPacket ? part.initPacket : part.image
                    var failed = false
                    for range in burst.packets {
                        logger.trace("packet", metadata: ["dfu.offset": "\(range.lowerBound)"])
                        do {
                            try await transport.writePacket(Array(bytes[range]))
                        } catch {
                            logger.debug("packet write failed", metadata: ["dfu.error": "\(error)"])
                            failed = true
                            break
                        }
                    }
                    pending.append(failed ? .disconnected : .packetsSent)
                case .startTimer(let timer, let duration):
                    timerTask?.cancel()
                    timerTask = Task { [clock] in
                        do {
                            try await clock.sleep(for: duration)
                            inboxContinuation.yield(.timerFired(timer))
                        } catch {
                            // Cancelled: a newer timer replaced this one.
                        }
                    }
                case .progress(let progress):
                    if startBytes == nil { startBytes = progress.bytesConfirmed }
                    let elapsed = start.duration(to: clock.now)
                    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                    let speed = seconds > 0 ? Double(progress.bytesConfirmed - (startBytes ?? 0)) / seconds : 0
                    progressContinuation.yield(
                        DFUProgressReport(
                            partIndex: partIndex, partCount: partCount, progress: progress, bytesPerSecond: speed))
                case .objectExecuted(let object):
                    logger.debug(
                        "object executed",
                        metadata: ["dfu.object.index": "\(object.index)", "dfu.offset": "\(object.offset)"])
                    guard var updated = journal else { break }
                    updated.record(object, part: partIndex)
                    journal = updated
                    do {
                        try await journalStore?.save(updated)
                    } catch {
                        // The journal only speeds up a later resume; the transfer itself is unaffected.
                        logger.debug("journal not saved", metadata: ["dfu.error": "\(error)"])
                    }
                case .completed:
                    logger.debug("part completed")
                    return journal
                case .failed(let error):
                    logger.debug("transfer failed", metadata: ["dfu.error": "\(error)"])
                    throw error
                }
            }
        }
    }
}
