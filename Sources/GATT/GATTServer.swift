import ATT
import BLECore
import Logging

/// A GATT server on one ATT bearer (the peripheral side of a link): serves a `GATTDatabase`, keeps the CCCDs of
/// this connection, and sends notifications and indications for the application (`GATTServerDelegate`).
///
/// Call `run()` to serve; it returns when the link ends. PDUs are handled one at a time in arrival order: the
/// server reads the next PDU only after it has answered the previous one (and after the delegate's
/// `beforeHandling` returned), so the delegate can pace the link.
public actor GATTServer {
    /// Core v5.4 Vol 3 Part F §3.3.3: a transaction (here: an indication awaiting its confirmation) times out after
    /// 30 seconds.
    public static let defaultIndicationTimeout: Duration = .seconds(30)
    /// PDUs `run()` takes from the bearer at once (a burst of Write Commands).
    static let receiveBatch = 32

    public nonisolated let bearer: any ATTBearer
    public nonisolated let database: GATTDatabase
    /// The Rx MTU this server announces in its Exchange MTU Response.
    public nonisolated let maximumMTU: UInt16

    private(set) var delegate: (any GATTServerDelegate)?
    private let indicationTimeout: Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    let logger: Logger

    /// Current attribute values, index = handle - 1.
    var values: [[UInt8]]
    /// CCCD values of this connection, by characteristic value handle.
    var configurations: [UInt16: GATTClientConfiguration] = [:]
    /// ATT_MTU in effect (23 until the client exchanges MTU).
    public private(set) var mtu = 23
    private var closedReason: GATTServerError?
    private var indicationInFlight = false
    private var indicationQueue: [CheckedContinuation<Void, Never>] = []
    private var confirmation: (id: UInt64, continuation: CheckedContinuation<Result<Void, GATTServerError>, Never>)?
    /// The indication sent or being sent (set before it goes out) and whether its confirmation has arrived: the
    /// client may confirm before `indicate` is back on the actor after the send.
    private var outstandingIndication: (id: UInt64, confirmed: Bool)?
    private var nextIndicationID: UInt64 = 0
    private var disconnectWaiters: [CheckedContinuation<GATTServerError, Never>] = []
    /// True while `run()` handles a PDU (from its arrival to its response); `closeAfterResponse()` then defers.
    private var handlingPDU = false
    /// Set by `closeAfterResponse()` during handling: `run()` closes once the PDU has been answered.
    private var closeRequested = false

    /// - Parameters:
    ///   - maximumMTU: our Rx MTU; the ATT_MTU becomes the smaller of this and the client's (at least 23).
    ///   - indicationTimeout: how long `indicate` waits for the confirmation before closing the bearer.
    ///   - clock: where the indication timer runs; tests pass a `ManualClock`.
    public init(
        database: GATTDatabase,
        bearer: any ATTBearer,
        maximumMTU: UInt16 = 247,
        delegate: (any GATTServerDelegate)? = nil,
        indicationTimeout: Duration = GATTServer.defaultIndicationTimeout,
        clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "bledfu.gatt.server")
    ) {
        self.database = database
        self.bearer = bearer
        self.maximumMTU = maximumMTU
        self.delegate = delegate
        self.indicationTimeout = indicationTimeout
        self.sleep = { duration in try await clock.sleep(for: duration) }
        self.logger = logger
        self.values = database.attributes.map(\.value)
    }

    /// Sets (or clears) the application. Held strongly until the link ends.
    public func setDelegate(_ delegate: (any GATTServerDelegate)?) {
        self.delegate = delegate
    }

    /// Serves the bearer until the link ends, and returns why it ended.
    @discardableResult
    public func run() async -> GATTServerError {
        while closedReason == nil {
            // What has already arrived, in one system call where the bearer can; still handled one PDU at a time.
            let arrived: [[UInt8]]
            do {
                arrived = try await bearer.receive(upTo: Self.receiveBatch)
            } catch {
                let code: GATTServerError.Code = error.code == .timeout ? .timeout : .disconnected
                await finish(GATTServerError(code, error.description))
                break
            }
            for bytes in arrived where closedReason == nil {
                logger.trace("GATT server receive", metadata: ["att.pdu": "\(bytes.hexString)"])
                handlingPDU = true
                await handle(bytes)
                handlingPDU = false
                if closeRequested {
                    await finish(GATTServerError(.disconnected, "closed by the server after the response"))
                }
            }
        }
        return closedReason ?? GATTServerError(.disconnected)
    }

    /// An indication waits for its confirmation (for tests and diagnostics).
    var isAwaitingConfirmation: Bool { confirmation != nil }

    /// Suspends until the link has ended and returns why.
    public func disconnected() async -> GATTServerError {
        if let closedReason { return closedReason }
        return await withCheckedContinuation { disconnectWaiters.append($0) }
    }

    /// Closes the link (a disconnect by the peripheral).
    public func close() async {
        await finish(GATTServerError(.disconnected, "closed by the server"))
    }

    /// Closes the link once the PDU being handled is answered: a delegate calls this while the server handles a
    /// PDU (from `beforeHandling`, `write`, ...) and returns; the server sends the response (a Write Response, an
    /// Error Response; nothing for a command) and then closes the bearer, so the PDUs the delegate sent first
    /// (notifications), the response and the close reach the peer in that order. It returns at once: awaiting
    /// the close here would wait for the server, which waits for the delegate. Called while no PDU is being
    /// handled, it closes at once, like `close()`. The server handles one PDU at a time, so a call from another
    /// task during that time also waits for the response.
    public func closeAfterResponse() async {
        if handlingPDU {
            closeRequested = true
        } else {
            await close()
        }
    }

    /// The CCCD value the client wrote for the characteristic value at `valueHandle` (empty when never written).
    public func clientConfiguration(valueHandle: UInt16) -> GATTClientConfiguration {
        configurations[valueHandle] ?? []
    }

    /// Whether the client enabled notifications for the characteristic value at `valueHandle`.
    public func isNotifying(valueHandle: UInt16) -> Bool {
        clientConfiguration(valueHandle: valueHandle).contains(.notification)
    }

    /// Whether the client enabled indications for the characteristic value at `valueHandle`.
    public func isIndicating(valueHandle: UInt16) -> Bool {
        clientConfiguration(valueHandle: valueHandle).contains(.indication)
    }

    /// The stored value of the attribute at `handle`.
    public func value(handle: UInt16) -> [UInt8]? {
        guard database[handle] != nil else { return nil }
        return values[Int(handle) - 1]
    }

    /// Replaces the stored value of the attribute at `handle` (what reads return unless the delegate answers).
    public func setValue(_ value: [UInt8], handle: UInt16) throws(GATTServerError) {
        guard database[handle] != nil else { throw GATTServerError(.invalidHandle, "no attribute at \(handle)") }
        values[Int(handle) - 1] = value
    }

    /// Sends a Handle Value Notification. It does not check the CCCD (the application decides; a fault model may
    /// notify regardless). Suspends while the bearer is full. A value longer than ATT_MTU - 3 is truncated, as
    /// Core v5.4 Vol 3 Part F §3.4.7.1 prescribes.
    public func notify(handle: UInt16, value: [UInt8]) async throws(GATTServerError) {
        if let closedReason { throw closedReason }
        let pdu = ATTPDU.handleValueNotification(handle: handle, value: Array(value.prefix(mtu - 3)))
        try await send(pdu)
    }

    /// Sends a Handle Value Indication and waits for the client's confirmation. Core v5.4 Vol 3 Part F §3.4.7.2:
    /// only one indication may be outstanding, so concurrent calls go one after another. Without a confirmation
    /// within the indication timeout the bearer is closed and this throws `.timeout`.
    public func indicate(handle: UInt16, value: [UInt8]) async throws(GATTServerError) {
        while indicationInFlight {
            await withCheckedContinuation { indicationQueue.append($0) }
        }
        if let closedReason { throw closedReason }
        indicationInFlight = true
        defer {
            indicationInFlight = false
            if !indicationQueue.isEmpty { indicationQueue.removeFirst().resume() }
        }
        // Expect the confirmation before the indication goes out: the send leaves the actor, and the client's
        // confirmation can be handled by `run()` before this task is back (Core v5.4 Vol 3 Part F §3.4.7.3: a
        // confirmation answers the indication sent, whenever it arrives).
        nextIndicationID += 1
        let id = nextIndicationID
        outstandingIndication = (id, false)
        defer { outstandingIndication = nil }
        try await send(.handleValueIndication(handle: handle, value: Array(value.prefix(mtu - 3))))
        let sleep = self.sleep
        let timeout = indicationTimeout
        let timer = Task {
            do { try await sleep(timeout) } catch { return }
            await self.indicationTimedOut(id)
        }
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Void, GATTServerError>, Never>) in
            if outstandingIndication?.confirmed == true {
                continuation.resume(returning: .success(()))
            } else if let closedReason {
                continuation.resume(returning: .failure(closedReason))
            } else {
                confirmation = (id, continuation)
            }
        }
        timer.cancel()
        try result.get()
    }

    // MARK: - Internals

    func send(_ pdu: ATTPDU) async throws(GATTServerError) {
        let bytes = pdu.encoded
        logger.trace("GATT server send", metadata: ["att.pdu": "\(bytes.hexString)"])
        do {
            try await bearer.send(bytes)
        } catch {
            let reason = GATTServerError(.disconnected, error.description)
            await finish(reason)
            throw closedReason ?? reason
        }
    }

    func confirmationReceived() {
        guard let pending = confirmation else {
            if let outstanding = outstandingIndication, !outstanding.confirmed {
                outstandingIndication?.confirmed = true  // before `indicate` waits for it
                return
            }
            logger.debug("GATT server ignores a confirmation with no indication outstanding")
            return
        }
        confirmation = nil
        pending.continuation.resume(returning: .success(()))
    }

    func setConfiguration(_ configuration: GATTClientConfiguration, valueHandle: UInt16) {
        configurations[valueHandle] = configuration
    }

    func exchangedMTU(clientRxMTU: UInt16) {
        // Core v5.4 Vol 3 Part F §3.4.2.2: both sides use min(client Rx MTU, server Rx MTU), at least 23.
        mtu = max(23, min(Int(clientRxMTU), Int(maximumMTU)))
    }

    private func indicationTimedOut(_ id: UInt64) async {
        guard let pending = confirmation, pending.id == id else { return }
        // Core v5.4 Vol 3 Part F §3.3.3: an indication not confirmed within 30 s ends the bearer.
        await finish(GATTServerError(.timeout, "no Handle Value Confirmation within the ATT timeout"))
    }

    private func finish(_ reason: GATTServerError) async {
        guard closedReason == nil else { return }
        closedReason = reason
        logger.debug("GATT server link ended", metadata: ["gatt.reason": "\(reason)"])
        if let pending = confirmation {
            confirmation = nil
            pending.continuation.resume(returning: .failure(reason))
        }
        for waiter in indicationQueue { waiter.resume() }
        indicationQueue = []
        for waiter in disconnectWaiters { waiter.resume(returning: reason) }
        disconnectWaiters = []
        await bearer.close()
        let delegate = self.delegate
        self.delegate = nil
        await delegate?.disconnected(reason, server: self)
    }
}
