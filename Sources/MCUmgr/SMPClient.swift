import BLECore
import CBOR
import Logging

/// Timeouts and retries of an ``SMPClient``.
public struct SMPClientConfiguration: Hashable, Sendable {
    /// Per request (Nordic iOS FAST_TIMEOUT 10 s, mcumgr-cli 10 s; smp-mcuboot.md §9, §11).
    public var timeout: Duration
    /// Resends of a request that got no answer (iOS retries 3 times, mcumgr-cli once).
    public var retries: Int
    /// SMP version of the requests; follows the server down to v1 when it answers v1 (as Nordic's hosts do).
    public var version: SMPVersion

    public init(timeout: Duration = .seconds(10), retries: Int = 2, version: SMPVersion = .v2) {
        self.timeout = timeout
        self.retries = retries
        self.version = version
    }
}

/// The SMP client of one connection: sequence numbers, response matching, timeouts and retries.
///
/// - Every request gets a sequence number not in use; the server echoes group, command and sequence
///   (smp-mcuboot.md §2.1), so a response is matched to its request by sequence and checked against its group,
///   command and operation. A response to a sequence that is not outstanding, and was not recently abandoned or
///   answered after a resend, is a protocol violation: the client closes and every waiting request fails.
/// - Requests may be outstanding together (the upload keeps a window in flight); they reach the link in the order
///   they were submitted, each as one burst of Write Commands.
/// - A request unanswered after its timeout is sent again, same bytes and same sequence (a late answer to the first
///   copy answers both), up to its retry count, then fails with `.timeout`.
/// - The timers run on the injected clock.
public actor SMPClient {
    public nonisolated let transport: any SMPTransport
    public let configuration: SMPClientConfiguration
    private let logger: Logger
    private let now: @Sendable () -> Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    private var table = SMPRequestTable()
    private var reassembler = SMPReassembler()
    private var version: SMPVersion
    private var completions: [UInt8: @Sendable (Result<SMPMessage, SMPError>) -> Void] = [:]
    private var timer: (task: Task<Void, Never>, wake: Duration)?
    private let outgoing: AsyncStream<(bytes: [UInt8], done: CheckedContinuation<SMPError?, Never>)>.Continuation
    private var closedReason: SMPError?
    /// Tasks waiting for the client to stop (nil: the wait ended first, at its deadline or by cancellation).
    private var closeWaiters: [UInt64: CheckedContinuation<SMPError?, Never>] = [:]
    private var nextCloseWaiter: UInt64 = 0

    public init(
        transport: any SMPTransport, configuration: SMPClientConfiguration = SMPClientConfiguration(),
        clock: some Clock<Duration> = ContinuousClock(), logger: Logger = Logger(label: "bledfu.smp.client")
    ) {
        self.transport = transport
        self.configuration = configuration
        self.version = configuration.version
        self.logger = logger
        let start = clock.now
        self.now = { start.duration(to: clock.now) }
        self.sleep = { try await clock.sleep(for: $0) }
        let (stream, continuation) = AsyncStream.makeStream(
            of: (bytes: [UInt8], done: CheckedContinuation<SMPError?, Never>).self)
        self.outgoing = continuation
        Task { await Self.writeLoop(stream, transport: transport) }
        Task { await self.readLoop() }
    }

    /// The ATT_MTU of the link.
    public var mtu: Int { get async { await transport.mtu } }

    /// Why the client stopped, once it has.
    public var closeReason: SMPError? { closedReason }

    /// The SMP version requests go out with (v2 until the server answers v1).
    public var currentVersion: SMPVersion { version }

    /// Sends `request` and returns the response body; a device error (`rc`/`err`) throws `.remote`.
    @discardableResult
    public func send(_ request: SMPRequest, timeout: Duration? = nil, retries: Int? = nil) async throws(SMPError) -> CBOR {
        let (stream, continuation) = AsyncStream.makeStream(of: Result<SMPMessage, SMPError>.self)
        try await submit(request, timeout: timeout, retries: retries) { result in
            continuation.yield(result)
            continuation.finish()
        }
        var iterator = stream.makeAsyncIterator()
        let result = await iterator.next() ?? .failure(SMPError(.closed, "no answer"))
        return try Self.body(of: result.get(), request: request)
    }

    /// The body of a response, or `.remote` for an error status.
    public static func body(of message: SMPMessage, request: SMPRequest) throws(SMPError) -> CBOR {
        let status = SMPStatus(body: message.body)
        guard status == .ok else { throw SMPError.remote(status, request: "\(request.group)/\(request.command)") }
        return message.body ?? .map([])
    }

    /// Queues `request` and returns once its bytes reached the link; `completion` runs once with the response or
    /// the failure (timeout after the retries, link loss, protocol violation). Requests submitted one after the
    /// other reach the link in that order.
    public func submit(
        _ request: SMPRequest, timeout: Duration? = nil, retries: Int? = nil,
        completion: @escaping @Sendable (Result<SMPMessage, SMPError>) -> Void
    ) async throws(SMPError) {
        if let closedReason { throw closedReason }
        guard let sequence = table.allocate() else {
            throw SMPError(.invalidArgument, "256 requests outstanding: no free sequence number")
        }
        let bytes = request.message(sequence: sequence, version: version).encoded()
        let deadline = now() + (timeout ?? configuration.timeout)
        table.register(
            SMPRequestTable.Entry(
                sequence: sequence, operation: request.operation, group: request.group, command: request.command,
                bytes: bytes, timeout: timeout ?? configuration.timeout, retriesLeft: retries ?? configuration.retries,
                deadline: deadline))
        completions[sequence] = completion
        logger.trace("SMP request", metadata: ["smp.seq": "\(sequence)", "smp.request": "\(request.group)/\(request.command)"])
        armTimer()
        if let failure = await write(bytes) {
            close(failure)
            throw failure
        }
    }

    /// Suspends until the client stops and returns why; nil when `limit` passes first (on the injected clock) or the
    /// task is cancelled: a wait for the end of a link always has a deadline.
    public func closed(within limit: Duration) async -> SMPError? {
        if let closedReason { return closedReason }
        nextCloseWaiter += 1
        let id = nextCloseWaiter
        let sleep = self.sleep
        let deadline = Task {
            do {
                try await sleep(limit)
            } catch {
                return  // the wait ended first
            }
            await self.endCloseWait(id)
        }
        defer { deadline.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { closeWaiters[id] = $0 }
        } onCancel: {
            Task { await self.endCloseWait(id) }
        }
    }

    private func endCloseWait(_ id: UInt64) {
        closeWaiters.removeValue(forKey: id)?.resume(returning: nil)
    }

    /// Closes the client and the link; waiting requests fail with `.closed`.
    public func close() async {
        close(SMPError(.closed, "closed by this side"))
        await transport.close()
    }

    // MARK: - Internals

    private func write(_ bytes: [UInt8]) async -> SMPError? {
        await withCheckedContinuation { continuation in
            outgoing.yield((bytes, continuation))
        }
    }

    private static func writeLoop(
        _ stream: AsyncStream<(bytes: [UInt8], done: CheckedContinuation<SMPError?, Never>)>, transport: any SMPTransport
    ) async {
        for await item in stream {
            do {
                try await transport.send(item.bytes)
                item.done.resume(returning: nil)
            } catch {
                item.done.resume(returning: error)
            }
        }
    }

    private func readLoop() async {
        for await value in transport.notifications {
            for frame in reassembler.append(value) {
                received(frame)
                if closedReason != nil { return }
            }
        }
        if let fault = await transport.peerFault {
            close(SMPError(.protocolViolation, "\(fault); the link was closed"))
        } else {
            close(SMPError(.disconnected, "link lost"))
        }
    }

    private func received(_ frame: [UInt8]) {
        let message: SMPMessage
        do {
            message = try SMPMessage(decoding: frame)
        } catch {
            return close(SMPError(.protocolViolation, "undecodable SMP response \(Array(frame.prefix(32)).hexString): \(error)"))
        }
        switch table.match(message.header) {
        case .complete(let entry):
            if message.header.version < version { version = message.header.version }
            logger.trace("SMP response", metadata: ["smp.seq": "\(entry.sequence)"])
            completions.removeValue(forKey: entry.sequence)?(.success(message))
            armTimer()
        case .ignore:
            logger.trace("SMP late response ignored", metadata: ["smp.seq": "\(message.header.sequence)"])
        case .violation(let reason):
            close(SMPError(.protocolViolation, reason))
        }
    }

    private func armTimer() {
        guard let earliest = table.earliestDeadline else {
            timer?.task.cancel()
            timer = nil
            return
        }
        if let timer, timer.wake <= earliest { return }
        timer?.task.cancel()
        let delay = earliest - now()
        let sleep = self.sleep
        timer = (
            Task {
                do {
                    try await sleep(max(delay, .zero))
                } catch {
                    return
                }
                await self.timerWoke()
            }, earliest
        )
    }

    private func timerWoke() async {
        timer = nil
        let (resend, expired) = table.expire(now: now())
        for entry in expired {
            logger.debug("SMP request timed out", metadata: ["smp.seq": "\(entry.sequence)"])
            completions.removeValue(forKey: entry.sequence)?(
                .failure(SMPError(.timeout, "no answer to \(entry.group)/\(entry.command) (seq \(entry.sequence)) within \(entry.timeout)")))
        }
        armTimer()
        for bytes in resend {
            logger.debug("SMP request resent")
            if let failure = await write(bytes) { return close(failure) }
        }
    }

    private func close(_ reason: SMPError) {
        guard closedReason == nil else { return }
        closedReason = reason
        logger.debug("SMP client closing", metadata: ["smp.reason": "\(reason)"])
        timer?.task.cancel()
        timer = nil
        let waiting = completions
        completions = [:]
        table.removeAll()
        for (_, completion) in waiting.sorted(by: { $0.key < $1.key }) { completion(.failure(reason)) }
        for waiter in closeWaiters.values { waiter.resume(returning: reason) }
        closeWaiters = [:]
        outgoing.finish()
    }
}
