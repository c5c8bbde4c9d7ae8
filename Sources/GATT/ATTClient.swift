import ATT
import BLECore
import Logging
import Synchronization

/// The client side of one ATT bearer (Core v5.4 Vol 3 Part F §3.3): a thin actor that performs the actions of
/// `ATTClientStateMachine`.
///
/// - One request outstanding at a time; further requests queue in FIFO order.
/// - Commands (Write Command) go out in order with everything else and wait only for the bearer's back-pressure.
/// - A transaction timer (30 s by default) on the injected clock; on expiry the bearer is closed and every waiting
///   caller fails with `.timeout`. The same time bounds each hand-over to the bearer: a link that takes no PDU for
///   that long (a peer that stopped reading) is closed with `.timeout` too, so no caller waits forever on a full
///   link. (A kernel link ends that way on its own: Linux drops every LE link whose controller returns no ACL
///   credit for 45 s, `HCI_ACL_TX_TIMEOUT` in hci_core.c; a virtual link has no such rule.)
/// - Notifications and indications go to `notifications`; each indication is confirmed after it is in the stream.
/// - The peer's own requests are answered (this process is the only ATT user of the link): Exchange MTU gets our
///   Rx MTU, anything else gets "Request Not Supported".
///
/// The client starts reading the bearer as soon as it is created and lives until the bearer closes; call
/// `close()` when done.
public actor ATTClient {
    /// Core v5.4 Vol 3 Part F §3.3.3: an ATT transaction times out after 30 seconds.
    public static let defaultTransactionTimeout: Duration = .seconds(30)
    /// The Rx MTU we ask for by default: the largest ATT_MTU (Core v5.4 Vol 3 Part F §3.2.9, 512-octet values).
    public static let defaultRxMTU: UInt16 = 517

    public nonisolated let bearer: any ATTBearer
    /// Notifications and indications from the peer, in arrival order. Single consumer; ends when the bearer closes.
    public nonisolated let notifications: AsyncStream<ATTNotification>

    private var machine: ATTClientStateMachine
    private let timeout: Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    private let logger: Logger
    private let notificationContinuation: AsyncStream<ATTNotification>.Continuation
    /// Handles whose notification values go to a stream of their own (``notificationValues(handle:)``); nil once
    /// the client has stopped.
    private nonisolated let routes = Mutex<[UInt16: AsyncStream<[UInt8]>.Continuation]?>([:])
    private let outgoing: AsyncStream<Outgoing>.Continuation
    private var nextID: ATTClientStateMachine.RequestID = 0
    private var waiters: [ATTClientStateMachine.RequestID: CheckedContinuation<Result<ATTPDU, ATTClientError>, Never>] =
        [:]
    /// The transaction timer's task. One task serves consecutive transactions: it sleeps until the deadline it
    /// was started with, then fires if the outstanding transaction's deadline has passed, or sleeps on to it (a
    /// task and a clock timer per request would cost more than the request itself on a fast link).
    private var timer: Task<Void, Never>?
    /// The outstanding transaction and when it times out (time since `init`, on the injected clock).
    private var transactionDeadline: (id: ATTClientStateMachine.RequestID, at: Duration)?
    private let now: @Sendable () -> Duration
    /// PDUs handed to the write loop and not yet taken by the bearer, and since when (on `now()`'s scale) the
    /// loop has been waiting for the bearer to take its current one; the timer task closes a link stuck longer
    /// than the transaction timeout.
    private nonisolated let sending = Mutex<(pending: Int, since: Duration?)>((0, nil))
    /// Tasks waiting for the client to stop (nil: the wait ended first, at its deadline or by cancellation).
    private var disconnectWaiters: [UInt64: CheckedContinuation<ATTClientError?, Never>] = [:]
    private var nextDisconnectWaiter: UInt64 = 0

    private struct Outgoing: Sendable {
        /// One PDU, or a burst of commands that goes to the bearer in one `send(burst:)`.
        var pdus: [[UInt8]]
        /// Or a burst of commands sharing one header: `send(burst:prefix:)`, the PDUs never put together here.
        var prefixed: (prefix: [UInt8], payloads: [ArraySlice<UInt8>])? = nil
        var completion: CheckedContinuation<Result<Void, ATTClientError>, Never>?
    }
    /// The 3-byte Write Command header per handle, made once (a burst then allocates no header).
    private var writeCommandHeaders: [UInt16: [UInt8]] = [:]

    /// - Parameters:
    ///   - bearer: the link; the client owns it from now on (it closes it on timeout, protocol errors and `close()`).
    ///   - rxMTU: the Rx MTU announced to the peer when it asks (and the default for `exchangeMTU`).
    ///   - transactionTimeout: how long a request may wait for its response.
    ///   - clock: where the transaction timer runs; tests pass a `ManualClock`.
    public init(
        bearer: any ATTBearer,
        rxMTU: UInt16 = ATTClient.defaultRxMTU,
        transactionTimeout: Duration = ATTClient.defaultTransactionTimeout,
        clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "bledfu.att.client")
    ) {
        self.bearer = bearer
        self.machine = ATTClientStateMachine(rxMTU: rxMTU)
        self.timeout = transactionTimeout
        self.sleep = { duration in try await clock.sleep(for: duration) }
        let start = clock.now
        self.now = { start.duration(to: clock.now) }
        self.logger = logger
        (notifications, notificationContinuation) = AsyncStream.makeStream(of: ATTNotification.self)
        let (outgoingStream, outgoingContinuation) = AsyncStream.makeStream(of: Outgoing.self)
        self.outgoing = outgoingContinuation
        Task { await self.writeLoop(outgoingStream) }
        Task { await self.readLoop() }
    }

    /// The ATT_MTU in effect (23 until an MTU exchange).
    public var mtu: Int { machine.mtu }

    /// Requests waiting behind the outstanding one (for tests and diagnostics).
    var queuedRequestCount: Int { machine.queuedCount }

    /// Since when the write loop has been waiting for the bearer to take its current PDUs (nil: it is not), on the
    /// scale of the injected clock since `init` (for tests and diagnostics).
    nonisolated var handOverWaitingSince: Duration? { sending.withLock { $0.since } }

    /// Why the client stopped, once it has.
    public var closeReason: ATTClientError? { machine.closedReason }

    /// Exchange MTU (Core v5.4 Vol 3 Part F §3.4.2): announces `rxMTU` and returns the ATT_MTU now in effect,
    /// the smaller of both sides' values and never below 23.
    @discardableResult
    public func exchangeMTU(_ rxMTU: UInt16 = ATTClient.defaultRxMTU) async throws(ATTClientError) -> Int {
        _ = try await request(.exchangeMTURequest(clientRxMTU: rxMTU))
        return machine.mtu
    }

    /// Sends a request and returns its response. An Error Response becomes `.remote(code, opcode, handle)`.
    /// Not cancellable: once queued, a request ends with its response, the transaction timeout or the link's end
    /// (ATT has no way to withdraw a request that is on the air).
    public func request(_ pdu: ATTPDU) async throws(ATTClientError) -> ATTPDU {
        nextID += 1
        let id = nextID
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<ATTPDU, ATTClientError>, Never>) in
            waiters[id] = continuation
            perform(machine.request(pdu, id: id))
        }
        return try result.get()
    }

    /// Sends a command (e.g. Write Command) or any PDU that expects no response. Returns once the bearer has taken it.
    public func command(_ pdu: ATTPDU) async throws(ATTClientError) {
        if let reason = machine.closedReason { throw reason }
        guard pdu.opcode.kind == .command else {
            throw ATTClientError(.invalidArgument, "\(pdu.opcode) is not a command")
        }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, ATTClientError>, Never>) in
            enqueue(Outgoing(pdus: [pdu.encoded], completion: continuation))
        }
        try result.get()
    }

    /// Sends encoded commands (e.g. Write Commands from ``ATTPDU/encodeWriteCommand(handle:value:)``) as one burst:
    /// in this order, with nothing between them, in as few bearer calls as the bearer allows. Returns once the
    /// bearer has taken them all. Every PDU must be a command of at most ATT_MTU octets (else `.invalidArgument`
    /// and nothing is sent).
    public func commands(encoded pdus: [[UInt8]]) async throws(ATTClientError) {
        if let reason = machine.closedReason { throw reason }
        let limit = machine.mtu
        for pdu in pdus {
            guard let first = pdu.first, ATTOpcode(first).kind == .command else {
                throw ATTClientError(.invalidArgument, "not a command: \(pdu.prefix(8).map { $0 }.hexString)")
            }
            guard pdu.count <= limit else {
                throw ATTClientError(.invalidArgument, "command of \(pdu.count) octets exceeds ATT_MTU = \(limit)")
            }
        }
        guard !pdus.isEmpty else { return }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, ATTClientError>, Never>) in
            enqueue(Outgoing(pdus: pdus, completion: continuation))
        }
        try result.get()
    }

    /// Write Commands of every value of `values` to `handle` as one burst (§3.4.5.3): as
    /// ``commands(encoded:)`` with `ATTPDU.encodeWriteCommand(handle:value:)` of each value would send them, but the
    /// PDUs are never put together here: the bearer gets the header once and the values as they are
    /// (`ATTBearer.send(burst:prefix:)`; a socket writes both straight into its reused sendmmsg(2) buffer). A value
    /// longer than ATT_MTU − 3 throws `.invalidArgument` and nothing is sent.
    public func writeCommands(handle: UInt16, values: [ArraySlice<UInt8>]) async throws(ATTClientError) {
        if let reason = machine.closedReason { throw reason }
        let limit = machine.mtu - 3
        if let long = values.first(where: { $0.count > limit }) {
            throw ATTClientError(.invalidArgument, "command of \(long.count + 3) octets exceeds ATT_MTU = \(limit + 3)")
        }
        guard !values.isEmpty else { return }
        let header: [UInt8]
        if let known = writeCommandHeaders[handle] {
            header = known
        } else {
            header = [ATTOpcode.writeCommand.rawValue, UInt8(truncatingIfNeeded: handle), UInt8(truncatingIfNeeded: handle >> 8)]
            writeCommandHeaders[handle] = header
        }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, ATTClientError>, Never>) in
            enqueue(Outgoing(pdus: [], prefixed: (header, values), completion: continuation))
        }
        try result.get()
    }

    /// The values of the notifications and indications on `handle`, in arrival order, handed over by the read loop
    /// itself (no task in between, which matters on a per-PDU path such as a DFU Control Point). They no longer
    /// appear in ``notifications``. A later call for the same handle replaces the stream (the old one ends). The
    /// stream ends when the client stops.
    public nonisolated func notificationValues(handle: UInt16) -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        let replaced = routes.withLock { routes -> (AsyncStream<[UInt8]>.Continuation?, Bool) in
            guard routes != nil else { return (nil, false) }
            return (routes?.updateValue(continuation, forKey: handle), true)
        }
        replaced.0?.finish()
        if !replaced.1 { continuation.finish() }
        return stream
    }

    /// Suspends until the client has stopped (link loss, timeout, protocol error or `close()`) and returns why; nil
    /// when `limit` passes first (on the injected clock) or the task is cancelled. A peer may never drop the link, and
    /// with no transaction outstanding nothing else would end the wait: every wait for a disconnect has a deadline.
    public func disconnected(within limit: Duration) async -> ATTClientError? {
        await waitForDisconnect(limit: limit)
    }

    /// ``disconnected(within:)`` with no deadline of its own, for callers that bound the wait themselves (tests that
    /// wait for a disconnect they caused; a task group with a deadline: cancellation ends it, with `.closed`).
    public func disconnected() async -> ATTClientError {
        await waitForDisconnect(limit: nil) ?? machine.closedReason ?? ATTClientError(.closed, "the wait was cancelled")
    }

    private func waitForDisconnect(limit: Duration?) async -> ATTClientError? {
        if let reason = machine.closedReason { return reason }
        nextDisconnectWaiter += 1
        let id = nextDisconnectWaiter
        let sleep = self.sleep
        let deadline = limit.map { limit in
            Task {
                do {
                    try await sleep(limit)
                } catch {
                    return  // the wait ended first
                }
                await self.endDisconnectWait(id)
            }
        }
        defer { deadline?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { disconnectWaiters[id] = $0 }
        } onCancel: {
            Task { await self.endDisconnectWait(id) }
        }
    }

    /// Tasks waiting in ``disconnected(within:)`` (for tests).
    var disconnectWaiterCount: Int { disconnectWaiters.count }

    private func endDisconnectWait(_ id: UInt64) {
        disconnectWaiters.removeValue(forKey: id)?.resume(returning: nil)
    }

    /// Closes the bearer; waiting callers fail with `.closed`.
    public func close() async {
        perform(machine.close(ATTClientError(.closed, "closed by this side")))
        await bearer.close()
    }

    // MARK: - Performing actions

    private func perform(_ actions: [ATTClientStateMachine.Action]) {
        for action in actions {
            switch action {
            case .send(let bytes):
                logger.trace("ATT send", metadata: ["att.pdu": "\(bytes.hexString)"])
                enqueue(Outgoing(pdus: [bytes], completion: nil))
            case .startTimer(let id):
                transactionDeadline = (id, now() + timeout)
                if timer == nil { startTimer(after: timeout) }
            case .cancelTimer:
                // The timer task finds nothing due when it wakes, and ends.
                transactionDeadline = nil
            case .complete(let id, let result):
                waiters.removeValue(forKey: id)?.resume(returning: result)
            case .deliver(let notification):
                logger.trace("ATT notification", metadata: ["att.handle": "\(notification.handle)"])
                if let route = routes.withLock({ $0?[notification.handle] }) {
                    route.yield(notification.value)
                } else {
                    notificationContinuation.yield(notification)
                }
            case .close(let reason):
                logger.debug("ATT client closing", metadata: ["att.reason": "\(reason)"])
                notificationContinuation.finish()
                let routed = routes.withLock { routes -> [AsyncStream<[UInt8]>.Continuation] in
                    defer { routes = nil }
                    return routes.map { Array($0.values) } ?? []
                }
                for route in routed { route.finish() }
                outgoing.finish()
                timer?.cancel()
                timer = nil
                transactionDeadline = nil
                for waiter in disconnectWaiters.values { waiter.resume(returning: reason) }
                disconnectWaiters = [:]
                let bearer = self.bearer
                Task { await bearer.close() }
            }
        }
    }

    private func startTimer(after delay: Duration) {
        let sleep = self.sleep
        timer = Task {
            do {
                try await sleep(delay)
            } catch {
                return  // cancelled: the client closed
            }
            self.timerWoke()
        }
    }

    /// Hands `item` to the write loop and makes sure the timer watches it.
    private func enqueue(_ item: Outgoing) {
        sending.withLock { $0.pending += 1 }
        if case .terminated = outgoing.yield(item) {
            // Closed meanwhile (the callers check first; this keeps a caller from waiting on a dropped PDU).
            sending.withLock { $0.pending -= 1 }
            item.completion?.resume(returning: .failure(machine.closedReason ?? ATTClientError(.closed, "closed")))
            return
        }
        if timer == nil, machine.closedReason == nil { startTimer(after: timeout) }
    }

    private func timerWoke() {
        timer = nil
        guard machine.closedReason == nil else { return }
        let current = now()
        let (pending, since) = sending.withLock { ($0.pending, $0.since) }
        if let since, current - since >= timeout {
            // The bearer has not taken a PDU for the whole transaction timeout: the peer stopped reading.
            transactionDeadline = nil
            return perform(machine.close(ATTClientError(.timeout, "the link took no PDU within the ATT timeout")))
        }
        var next: Duration?
        if let deadline = transactionDeadline {
            let remaining = deadline.at - current
            guard remaining > .zero else {
                transactionDeadline = nil
                return perform(machine.timerFired(id: deadline.id))
            }
            next = remaining
        }
        if pending > 0 {
            let remaining = since.map { $0 + timeout - current } ?? timeout
            next = min(next ?? remaining, remaining)
        }
        if let next { startTimer(after: next) }
    }

    private func received(_ bytes: [UInt8]) {
        logger.trace("ATT receive", metadata: ["att.pdu": "\(bytes.hexString)"])
        perform(machine.received(bytes))
    }

    private func bearerFailed(_ error: BearerError) {
        perform(machine.bearerFailed(ATTClientError(bearer: error)))
    }

    private func sendFailed(_ error: BearerError) -> ATTClientError {
        perform(machine.bearerFailed(ATTClientError(bearer: error)))
        return machine.closedReason ?? ATTClientError(bearer: error)
    }

    private func readLoop() async {
        while true {
            do {
                let bytes = try await bearer.receive()
                received(bytes)
                if machine.closedReason != nil { return }
            } catch {
                bearerFailed(error)
                return
            }
        }
    }

    /// The single writer: PDUs reach the bearer in the order the state machine and callers produced them.
    private nonisolated func writeLoop(_ stream: AsyncStream<Outgoing>) async {
        for await item in stream {
            let started = now()
            sending.withLock { $0.since = started }
            let result: Result<Void, ATTClientError>
            do {
                if let prefixed = item.prefixed {
                    try await bearer.send(burst: prefixed.payloads, prefix: prefixed.prefix)
                } else if item.pdus.count == 1 {
                    try await bearer.send(item.pdus[0])
                } else {
                    try await bearer.send(burst: item.pdus)
                }
                result = .success(())
            } catch {
                result = .failure(await sendFailed(error))
            }
            sending.withLock { state in
                state.pending -= 1
                state.since = nil
            }
            item.completion?.resume(returning: result)
        }
    }
}
