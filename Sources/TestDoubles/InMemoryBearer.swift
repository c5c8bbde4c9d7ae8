import BLECore
import Synchronization

/// One end of an in-memory ATT bearer pair, for tests and in-process simulations.
///
/// Message-preserving (one `send` is one `receive`), ordered, and bounded: each direction holds at most `capacity`
/// PDUs, and `send` suspends while the peer's queue is full (back-pressure, as a socket's send buffer does).
/// `close()` on one end makes the peer's `receive()` throw `.disconnected` once it has drained what was already sent,
/// and this end's pending and later calls throw `.closed`.
///
/// The pair shares one link security level: it starts `.low`, and either end raises it at once up to the pair's
/// `maximumSecurity` (as a stored bond would; nil: the link has no security levels and a raise throws).
public final class InMemoryBearer: ATTBearer {
    public let linkInfo: LinkInfo
    private let inbox: Channel
    private let outbox: Channel
    private let observer: (any PDUObserver)?
    private let security: SecurityState

    /// Two connected ends. `observer`, when given, sees every PDU from the first end's point of view
    /// (`sent: true` for PDUs the first end sent).
    public static func makePair(
        capacity: Int = 16, maximumPDUSize: Int? = nil, observer: (any PDUObserver)? = nil,
        maximumSecurity: LinkSecurityLevel? = .medium
    ) -> (InMemoryBearer, InMemoryBearer) {
        let aToB = Channel(capacity: max(1, capacity))
        let bToA = Channel(capacity: max(1, capacity))
        let info = LinkInfo(maximumPDUSize: maximumPDUSize)
        let security = SecurityState(maximum: maximumSecurity)
        let a = InMemoryBearer(
            inbox: bToA, outbox: aToB, linkInfo: info, observer: observer.map { Observer(base: $0, flip: false) },
            security: security)
        let b = InMemoryBearer(
            inbox: aToB, outbox: bToA, linkInfo: info, observer: observer.map { Observer(base: $0, flip: true) },
            security: security)
        return (a, b)
    }

    private init(
        inbox: Channel, outbox: Channel, linkInfo: LinkInfo, observer: (any PDUObserver)?, security: SecurityState
    ) {
        self.inbox = inbox
        self.outbox = outbox
        self.linkInfo = linkInfo
        self.observer = observer
        self.security = security
    }

    public func securityLevel() async -> LinkSecurityLevel { security.level.withLock { $0 } }

    public func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        guard let maximum = security.maximum else {
            throw BearerError(.unsupported, "this in-memory link has no security levels")
        }
        return security.level.withLock { current in
            current = max(current, min(level, maximum))
            return current
        }
    }

    private final class SecurityState: Sendable {
        let maximum: LinkSecurityLevel?
        let level = Mutex(LinkSecurityLevel.low)
        init(maximum: LinkSecurityLevel?) { self.maximum = maximum }
    }

    public func send(_ pdu: [UInt8]) async throws(BearerError) {
        if let limit = linkInfo.maximumPDUSize, pdu.count > limit {
            throw BearerError(.pduTooLarge, "\(pdu.count) bytes > \(limit)")
        }
        try await outbox.send(pdu, observe: { self.observer?.observe(pdu: pdu, sent: true) })
    }

    public func receive() async throws(BearerError) -> [UInt8] {
        try await inbox.receive()
    }

    public func close() async {
        inbox.close(receiverSide: true)
        outbox.close(receiverSide: false)
    }

    private struct Observer: PDUObserver {
        let base: any PDUObserver
        let flip: Bool
        func observe(pdu: [UInt8], sent: Bool) { base.observe(pdu: pdu, sent: flip ? !sent : sent) }
    }

    /// One direction: a bounded FIFO with suspended senders and receivers.
    private final class Channel: Sendable {
        private struct WaitingSender {
            var id: UInt64
            var pdu: [UInt8]
            var continuation: CheckedContinuation<Result<Void, BearerError>, Never>
        }

        private struct State {
            var buffer: [[UInt8]] = []
            var senders: [WaitingSender] = []
            var receivers: [CheckedContinuation<Result<[UInt8], BearerError>, Never>] = []
            var nextID: UInt64 = 0
            /// Set when the receiving end closed (its receives throw `.closed`, sends into it `.disconnected`).
            var receiverClosed = false
            /// Set when the sending end closed (receives drain, then throw `.disconnected`; sends throw `.closed`).
            var senderClosed = false
        }

        private let capacity: Int
        private let state: Mutex<State>

        init(capacity: Int) {
            self.capacity = capacity
            self.state = Mutex(State())
        }

        func send(_ pdu: [UInt8], observe: @escaping @Sendable () -> Void) async throws(BearerError) {
            let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, BearerError>, Never>) in
                enum Step { case done(Result<Void, BearerError>), deliver(CheckedContinuation<Result<[UInt8], BearerError>, Never>), wait }
                let step: Step = state.withLock { state in
                    if state.senderClosed { return .done(.failure(BearerError(.closed, "this end is closed"))) }
                    if state.receiverClosed { return .done(.failure(BearerError(.disconnected, "peer closed"))) }
                    observe()
                    if !state.receivers.isEmpty { return .deliver(state.receivers.removeFirst()) }
                    if state.buffer.count < capacity {
                        state.buffer.append(pdu)
                        return .done(.success(()))
                    }
                    state.nextID += 1
                    state.senders.append(WaitingSender(id: state.nextID, pdu: pdu, continuation: continuation))
                    return .wait
                }
                switch step {
                case .done(let result): continuation.resume(returning: result)
                case .deliver(let receiver):
                    receiver.resume(returning: .success(pdu))
                    continuation.resume(returning: .success(()))
                case .wait: break
                }
            }
            try result.get()
        }

        func receive() async throws(BearerError) -> [UInt8] {
            let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[UInt8], BearerError>, Never>) in
                let (immediate, unblocked) = state.withLock { state -> (Result<[UInt8], BearerError>?, WaitingSender?) in
                    if state.receiverClosed { return (.failure(BearerError(.closed, "this end is closed")), nil) }
                    if !state.buffer.isEmpty {
                        let pdu = state.buffer.removeFirst()
                        var unblocked: WaitingSender?
                        if !state.senders.isEmpty {
                            let sender = state.senders.removeFirst()
                            state.buffer.append(sender.pdu)
                            unblocked = sender
                        }
                        return (.success(pdu), unblocked)
                    }
                    if state.senderClosed { return (.failure(BearerError(.disconnected, "peer closed")), nil) }
                    state.receivers.append(continuation)
                    return (nil, nil)
                }
                unblocked?.continuation.resume(returning: .success(()))
                if let immediate { continuation.resume(returning: immediate) }
            }
            return try result.get()
        }

        /// - Parameter receiverSide: true when the end that receives from this channel closes.
        func close(receiverSide: Bool) {
            let (senders, receivers) = state.withLock { state in
                if receiverSide {
                    state.receiverClosed = true
                    state.buffer = []
                } else {
                    state.senderClosed = true
                }
                let senders = state.senders
                state.senders = []
                // Receivers only wait on an empty buffer, so they can be failed right away.
                let receivers = state.receivers
                state.receivers = []
                return (senders, receivers)
            }
            let senderError = receiverSide ? BearerError(.disconnected, "peer closed") : BearerError(.closed, "this end is closed")
            for sender in senders { sender.continuation.resume(returning: .failure(senderError)) }
            let receiverError = receiverSide ? BearerError(.closed, "this end is closed") : BearerError(.disconnected, "peer closed")
            for receiver in receivers { receiver.resume(returning: .failure(receiverError)) }
        }
    }
}
