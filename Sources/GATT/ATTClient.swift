import ATT
import BLECore
import Logging

/// The client side of one ATT bearer (Core v5.4 Vol 3 Part F §3.3): a thin actor that performs the actions of
/// `ATTClientStateMachine`.
///
/// - One request outstanding at a time; further requests queue in FIFO order.
/// - Commands (Write Command) go out in order with everything else and wait only for the bearer's back-pressure.
/// - A transaction timer (30 s by default) on the injected clock; on expiry the bearer is closed and every waiting
///   caller fails with `.timeout`.
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
    private let outgoing: AsyncStream<Outgoing>.Continuation
    private var nextID: ATTClientStateMachine.RequestID = 0
    private var waiters: [ATTClientStateMachine.RequestID: CheckedContinuation<Result<ATTPDU, ATTClientError>, Never>] =
        [:]
    private var timer: Task<Void, Never>?
    private var disconnectWaiters: [CheckedContinuation<ATTClientError, Never>] = []

    private struct Outgoing: Sendable {
        var bytes: [UInt8]
        var completion: CheckedContinuation<Result<Void, ATTClientError>, Never>?
    }

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
            outgoing.yield(Outgoing(bytes: pdu.encoded, completion: continuation))
        }
        try result.get()
    }

    /// Suspends until the client has stopped (link loss, timeout, protocol error or `close()`) and returns why.
    public func disconnected() async -> ATTClientError {
        if let reason = machine.closedReason { return reason }
        return await withCheckedContinuation { disconnectWaiters.append($0) }
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
                outgoing.yield(Outgoing(bytes: bytes, completion: nil))
            case .startTimer(let id):
                timer?.cancel()
                let sleep = self.sleep
                let timeout = self.timeout
                timer = Task {
                    do {
                        try await sleep(timeout)
                    } catch {
                        return  // cancelled: the response arrived in time
                    }
                    self.timerFired(id)
                }
            case .cancelTimer:
                timer?.cancel()
                timer = nil
            case .complete(let id, let result):
                waiters.removeValue(forKey: id)?.resume(returning: result)
            case .deliver(let notification):
                logger.trace("ATT notification", metadata: ["att.handle": "\(notification.handle)"])
                notificationContinuation.yield(notification)
            case .close(let reason):
                logger.debug("ATT client closing", metadata: ["att.reason": "\(reason)"])
                notificationContinuation.finish()
                outgoing.finish()
                timer?.cancel()
                timer = nil
                for waiter in disconnectWaiters { waiter.resume(returning: reason) }
                disconnectWaiters = []
                let bearer = self.bearer
                Task { await bearer.close() }
            }
        }
    }

    private func timerFired(_ id: ATTClientStateMachine.RequestID) {
        perform(machine.timerFired(id: id))
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
            do {
                try await bearer.send(item.bytes)
                item.completion?.resume(returning: .success(()))
            } catch {
                let reason = await sendFailed(error)
                item.completion?.resume(returning: .failure(reason))
            }
        }
    }
}
