import DFUProtocol
import Logging
import Synchronization

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
    private let checkpoint: Checkpoint?
    private let logger: Logger
    /// The inbox of the run in progress; notifications between runs are dropped.
    /// The inbox of the run in progress, behind a lock so that notifications reach it without a hop onto the actor.
    private nonisolated let currentInbox = DriverInbox()
    private var forwarder: Task<Void, Never>?
    private var linkDown = false
    private var stopRequested = false
    /// The pacing policy as the last run left it: what it learned about the device on this connection
    /// (``AdaptiveStreamPacing/snapshot`` seeds the next connection to the same kind of device).
    public private(set) var learnedPacing: (any PacingPolicy)?

    /// Receives the journal after every executed object (the updater's part context keeps it as a checkpoint).
    public typealias Checkpoint = @Sendable (DFUJournal) async -> Void

    public init(
        transport: any DFUTransport, clock: C, configuration: SecureDFUConfiguration = SecureDFUConfiguration(),
        checkpoint: Checkpoint? = nil, logger: Logger = Logger(label: "bledfu.engine")
    ) {
        (progress, progressContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
        self.transport = transport
        self.clock = clock
        self.configuration = configuration
        self.checkpoint = checkpoint
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
        let inbox = currentInbox
        forwarder = Task.detached { [weak self] in
            for await bytes in notifications { inbox.deliver(.controlPointNotification(bytes)) }
            await self?.linkEnded()
        }
    }

    private func deliver(_ event: DFUEvent) { currentInbox.deliver(event) }

    /// Asks the run in progress (or the next run) to stop at the next safe point: after the object being sent is
    /// executed and journaled. The run then throws ``DFUEngineError/Code/stopped``; the device is not sent Abort, so a
    /// later run (a new driver, the same journal) continues from there. Cancelling the task instead stops at once.
    public func requestStop() {
        stopRequested = true
        deliver(.stopRequested)
    }

    private func linkEnded() {
        linkDown = true
        deliver(.disconnected)
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
        if let journal, journal.partIndex == partIndex { configuration.executedOffset = journal.executedOffset }
        var machine = SecureDFUStateMachine(part: part, configuration: configuration)
        let (inbox, inboxContinuation) = AsyncStream.makeStream(of: DFUEvent.self)
        currentInbox.set(inboxContinuation)
        startForwarding()
        var logger = self.logger
        logger[metadataKey: "dfu.part"] = "\(partIndex)"
        var run = RunState(
            part: part, partIndex: partIndex, partCount: partCount, journal: journal, start: clock.now,
            inbox: inboxContinuation, logger: logger)
        defer {
            currentInbox.set(nil)
            run.timerTask?.cancel()
            inboxContinuation.finish()
            learnedPacing = machine.pacing
        }
        run.pending = linkDown ? [.disconnected] : [.started(mtu: await transport.mtu)]
        if stopRequested { run.pending.insert(.stopRequested, at: 0) }
        var iterator = inbox.makeAsyncIterator()
        while true {
            var event: DFUEvent
            if !run.pending.isEmpty {
                event = run.pending.removeFirst()
            } else if let next = await iterator.next() {
                event = next
            } else {
                event = .disconnected
            }
            if Task.isCancelled { event = .cancelled }
            // Timers count from the moment the machine decided, not from when the actions before them finished: a
            // request's timeout starts when the request goes out (its Write Response may take a while), so how long
            // the host took to get there never stretches it.
            let decided = clock.now
            for action in machine.handle(event) {
                if case .done = try await perform(action, decided: decided, run: &run) { return run.journal }
            }
        }
    }

    /// What one ``run(part:partIndex:partCount:journal:)`` keeps between actions.
    private struct RunState {
        let part: DFUPart
        let partIndex: Int
        let partCount: Int
        var journal: DFUJournal?
        let start: C.Instant
        let inbox: AsyncStream<DFUEvent>.Continuation
        let logger: Logger
        /// Events the actions produced, handled before the inbox's.
        var pending: [DFUEvent] = []
        /// One sleeping task serves consecutive timers (see `DriverTimer`); a new one starts only for a timer due
        /// before the sleeping one wakes.
        let timers = DriverTimer<C.Instant>()
        var timerTask: Task<Void, Never>?
        /// The bytes confirmed at the first progress report (the speed counts from there).
        var startBytes: Int?
    }

    private enum Step {
        case next
        case done
    }

    /// Performs one action of the state machine.
    private func perform(_ action: DFUAction, decided: C.Instant, run: inout RunState) async throws(DFUEngineError)
        -> Step
    {
        switch action {
        case .writeControlPoint(let request):
            run.logger.debug("control point request", metadata: ["dfu.request": "\(request)"])
            do {
                try await transport.writeControlPoint(request.encoded)
            } catch {
                if request == .abort { break }  // The device resets on Abort; a failed write changes nothing.
                run.logger.debug("control point write failed", metadata: ["dfu.error": "\(error)"])
                run.pending.append(.requestNotAcknowledged)
            }
        case .sendPackets(let burst):
            run.pending.append(await send(burst, run: run) ? .packetsSent : .disconnected)
        case .startTimer(let timer, let duration):
            arm(timer, at: decided.advanced(by: duration), run: &run)
        case .progress(let progress):
            report(progress, run: &run)
        case .objectExecuted(let object):
            await executed(object, run: &run)
        case .completed:
            run.logger.debug("part completed")
            return .done
        case .failed(var error):
            // A link the ATT client closed because the device broke ATT is a protocol error, not a loss.
            if [.disconnected, .transport].contains(error.code), let fault = await transport.peerFault {
                error = DFUEngineError(.protocolViolation, "\(fault.reason); the link was closed")
            }
            run.logger.debug("transfer failed", metadata: ["dfu.error": "\(error)"])
            throw error
        }
        return .next
    }

    /// Writes a burst of packets; false when the link failed.
    private func send(_ burst: DFUPacketBurst, run: RunState) async -> Bool {
        let bytes = burst.source == .initPacket ? run.part.initPacket : run.part.image
        run.logger.trace(
            "packets",
            metadata: ["dfu.offset": "\(burst.packets.first?.lowerBound ?? 0)", "dfu.packets": "\(burst.packets.count)"])
        do {
            // The whole burst at once: the transport hands it to the link in as few calls as it can.
            try await transport.writePackets(burst.packets.map { bytes[$0] })
            return true
        } catch {
            run.logger.debug("packet write failed", metadata: ["dfu.error": "\(error)"])
            return false
        }
    }

    /// Arms `timer`; starts a sleeping task when none sleeps until before `deadline`.
    private func arm(_ timer: DFUTimer, at deadline: C.Instant, run: inout RunState) {
        let timers = run.timers
        guard timers.arm(timer, at: deadline) else { return }
        run.timerTask?.cancel()
        let inbox = run.inbox
        run.timerTask = Task { [clock] in
            var until = deadline
            while true {
                do {
                    try await clock.sleep(until: until, tolerance: nil)
                } catch {
                    return  // Cancelled: a timer due earlier got a task of its own, or the run ended.
                }
                switch timers.woke(now: clock.now) {
                case .fire(let due):
                    inbox.yield(.timerFired(due))
                    return
                case .sleep(let next): until = next
                case .idle: return
                }
            }
        }
    }

    /// Reports progress with the speed since the run's first report.
    private func report(_ progress: DFUProgress, run: inout RunState) {
        if run.startBytes == nil { run.startBytes = progress.bytesConfirmed }
        let elapsed = run.start.duration(to: clock.now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let speed = seconds > 0 ? Double(progress.bytesConfirmed - (run.startBytes ?? 0)) / seconds : 0
        progressContinuation.yield(
            DFUProgressReport(
                partIndex: run.partIndex, partCount: run.partCount, progress: progress, bytesPerSecond: speed))
    }

    /// Records an executed object in the journal and hands it to the checkpoint.
    private func executed(_ object: DFUExecutedObject, run: inout RunState) async {
        run.logger.debug(
            "object executed", metadata: ["dfu.object.index": "\(object.index)", "dfu.offset": "\(object.offset)"])
        guard var updated = run.journal else { return }
        updated.record(object, part: run.partIndex)
        run.journal = updated
        await checkpoint?(updated)
    }
}

/// The driver's timer: the state machine arms one timer at a time (a newer one replaces the older), almost always
/// the checkpoint timeout, again for every request. Instead of a task and a clock timer per request, one task
/// sleeps until the deadline it was started for, then fires the armed timer if it is due or sleeps on until it is.
/// Only a timer due before the sleeping task wakes (a prepare delay after a long timeout) needs a new task.
final class DriverTimer<Instant: InstantProtocol>: Sendable {
    enum Wake {
        /// This timer is due: deliver it; the task ends.
        case fire(DFUTimer)
        /// The armed timer is due later: sleep until then.
        case sleep(until: Instant)
        /// Nothing armed: the task ends.
        case idle
    }

    private struct State {
        var armed: (timer: DFUTimer, deadline: Instant)?
        /// When the sleeping task wakes (nil: no task sleeps).
        var sleeperWake: Instant?
    }

    private let state = Mutex(State())

    /// Arms `timer` (replacing the armed one). Returns true when the caller must start a new sleeping task (and
    /// cancel the old one): no task sleeps, or it wakes after `deadline`.
    func arm(_ timer: DFUTimer, at deadline: Instant) -> Bool {
        state.withLock { state in
            state.armed = (timer, deadline)
            if let wake = state.sleeperWake, wake <= deadline { return false }
            state.sleeperWake = deadline
            return true
        }
    }

    /// The sleeping task woke at `now`: what it does next.
    func woke(now: Instant) -> Wake {
        state.withLock { state in
            guard let armed = state.armed else {
                state.sleeperWake = nil
                return .idle
            }
            guard armed.deadline <= now else {
                state.sleeperWake = armed.deadline
                return .sleep(until: armed.deadline)
            }
            state.armed = nil
            state.sleeperWake = nil
            return .fire(armed.timer)
        }
    }
}

/// The inbox of the driver's run in progress; events for no run are dropped.
final class DriverInbox: Sendable {
    private let continuation = Mutex<AsyncStream<DFUEvent>.Continuation?>(nil)

    func set(_ inbox: AsyncStream<DFUEvent>.Continuation?) { continuation.withLock { $0 = inbox } }

    func deliver(_ event: DFUEvent) { _ = continuation.withLock { $0?.yield(event) } }
}
