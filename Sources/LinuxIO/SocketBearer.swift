import BLECore
import Logging
import Synchronization
import SystemPackage

/// An ``ATTBearer`` over any connected, message-preserving socket (AF_UNIX SOCK_SEQPACKET, L2CAP SOCK_SEQPACKET):
/// one message is one ATT PDU.
///
/// - `send`: a non-blocking send; on EAGAIN it waits until the socket is writable and retries. The socket's send
///   buffer is therefore the transmit queue, and a full buffer suspends the sender (back-pressure, never drops).
/// - `receive`: waits until readable, then receives one message (up to 65536 bytes). End of stream, ECONNRESET,
///   EPIPE and ENOTCONN are `.disconnected`.
/// - `close`: shutdown at once, once; pending and later calls end with `.closed`. The descriptor itself is closed
///   when the last operation that was using it has returned (``SharedDescriptor``), so that a send or a wait never
///   lands on another socket that got the same number.
public final class SocketBearer: ATTBearer {
    /// The receive buffer: larger than any ATT PDU (ATT_MTU is at most 517, L2CAP SDUs at most 65535).
    public static let receiveBufferSize = 65536

    /// Messages one `receive(upTo:)` takes from the socket at most.
    public static let receiveBatchCapacity = 32

    public let linkInfo: LinkInfo
    private let logger: Logger
    private let descriptor: SharedDescriptor
    /// Receive buffers, reused: taken out while a receive runs (a concurrent receive makes its own).
    private let receiveBuffers = Mutex<ReceiveBatch?>(nil)
    /// Send buffers, reused: taken out while a burst is sent (a concurrent burst makes its own).
    private let sendBuffers = Mutex<SendBatch?>(nil)
    /// An empty message ended a batch: the next receive reports end of stream.
    private let endOfStreamPending = Mutex(false)
    /// Tests: runs when an operation found the socket not ready, just before it waits for readiness.
    private let beforeWait = Mutex<(@Sendable () -> Void)?>(nil)

    /// Tests: `hook` runs when an operation found the socket not ready, just before it waits (the moment a
    /// concurrent `close()` is the most dangerous).
    func setBeforeWaitHook(_ hook: (@Sendable () -> Void)?) { beforeWait.withLock { $0 = hook } }

    private func aboutToWait() { beforeWait.withLock { $0 }?() }

    /// Takes ownership of a connected socket (made non-blocking here).
    public init(descriptor: SocketDescriptor, linkInfo: LinkInfo = LinkInfo(), logger: Logger = Logger(label: "bledfu.bearer")) {
        // A descriptor from `SocketDescriptor.open` is already non-blocking; one from elsewhere may not be. Failing
        // here leaves a blocking socket, which still works for tests but is reported at debug level.
        do throws(Errno) {
            try SocketDescriptor.setNonBlockingCloseOnExec(descriptor.rawValue)
        } catch {
            logger.debug("cannot make socket non-blocking", metadata: ["errno": "\(error)"])
        }
        self.descriptor = SharedDescriptor(descriptor)
        self.linkInfo = linkInfo
        self.logger = logger
    }

    /// The descriptor while open (for socket options such as SO_SNDBUF).
    public var socket: SocketDescriptor? { descriptor.current }

    /// The descriptor, held open until the matching `descriptor.release()`.
    private func open() throws(BearerError) -> SocketDescriptor {
        guard let fd = descriptor.lease() else { throw BearerError(.closed, "bearer closed") }
        return fd
    }

    public func send(_ pdu: [UInt8]) async throws(BearerError) {
        if let limit = linkInfo.maximumPDUSize, pdu.count > limit {
            throw BearerError(.pduTooLarge, "\(pdu.count) bytes, link carries \(limit)")
        }
        let fd = try open()
        defer { descriptor.release() }
        while true {
            if descriptor.isClosed { throw BearerError(.closed, "bearer closed") }
            let result: IOResult<Int>
            do throws(Errno) {
                result = try fd.send(pdu)
            } catch {
                throw mapError(error, operation: "send")
            }
            switch result {
            case .processed:
                logger.trace("sent PDU", metadata: ["att.length": "\(pdu.count)"])
                return
            case .wouldBlock:
                aboutToWait()
                do throws(Errno) {
                    try await fd.waitWritable()
                } catch {
                    throw mapWaitError(error)
                }
            }
        }
    }

    /// Sends the PDUs with sendmmsg(2), up to ``SocketDescriptor/maximumBatch`` per call; on EAGAIN it waits until
    /// the socket is writable and goes on with the PDUs the kernel has not taken yet.
    public func send(burst pdus: [[UInt8]]) async throws(BearerError) {
        if let limit = linkInfo.maximumPDUSize, let pdu = pdus.first(where: { $0.count > limit }) {
            throw BearerError(.pduTooLarge, "\(pdu.count) bytes, link carries \(limit)")
        }
        try await sendAll(pdus.count) { fd, next throws(Errno) in try fd.send(messages: pdus[next...]) }
    }

    /// Each message `prefix` + payload, put together in a reused sendmmsg(2) buffer (``SendBatch``), up to
    /// ``SocketDescriptor/maximumBatch`` per call; on EAGAIN it waits until the socket is writable and goes on with
    /// the messages the kernel has not taken yet.
    public func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError) {
        if let limit = linkInfo.maximumPDUSize, let payload = payloads.first(where: { prefix.count + $0.count > limit }) {
            throw BearerError(.pduTooLarge, "\(prefix.count + payload.count) bytes, link carries \(limit)")
        }
        let batch = sendBuffers.withLock { $0.take() } ?? SendBatch()
        defer { sendBuffers.withLock { $0 = batch } }
        try await sendAll(payloads.count) { fd, next throws(Errno) in
            try fd.send(payloads: payloads[next...], prefix: prefix, using: batch)
        }
    }

    /// `count` messages, `sendFrom(fd, next)` sending from the `next`th on (it returns how many the kernel took), until
    /// all are sent; on EAGAIN it waits until the socket is writable.
    private func sendAll(
        _ count: Int, _ sendFrom: (SocketDescriptor, Int) throws(Errno) -> IOResult<Int>
    ) async throws(BearerError) {
        var next = 0
        let fd = try open()
        defer { descriptor.release() }
        while next < count {
            if descriptor.isClosed { throw BearerError(.closed, "bearer closed") }
            let result: IOResult<Int>
            do throws(Errno) {
                result = try sendFrom(fd, next)
            } catch {
                throw mapError(error, operation: "sendmmsg")
            }
            switch result {
            case .processed(let sent):
                logger.trace("sent PDUs", metadata: ["att.count": "\(sent)"])
                next += max(sent, 0)
                if sent <= 0 {
                    throw BearerError(.system, "sendmmsg took no message")
                }
            case .wouldBlock:
                aboutToWait()
                do throws(Errno) {
                    try await fd.waitWritable()
                } catch {
                    throw mapWaitError(error)
                }
            }
        }
    }

    public func receive() async throws(BearerError) -> [UInt8] {
        guard let pdu = try await receive(upTo: 1).first else { throw BearerError(.system, "recv returned nothing") }
        return pdu
    }

    /// Receives with recvmmsg(2) what has arrived (at most `maximumCount`, at most ``receiveBatchCapacity``); one
    /// message at a time (recv(2)) when `maximumCount` is 1.
    public func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        let batch = receiveBuffers.withLock { $0.take() } ?? ReceiveBatch(
            capacity: SocketBearer.receiveBatchCapacity, slotSize: SocketBearer.receiveBufferSize)
        defer { receiveBuffers.withLock { $0 = batch } }
        let fd = try open()
        defer { descriptor.release() }
        while true {
            if descriptor.isClosed { throw BearerError(.closed, "bearer closed") }
            if endOfStreamPending.withLock({ $0 }) { throw BearerError(.disconnected, "peer closed the link") }
            let result: IOResult<[[UInt8]]>
            do throws(Errno) {
                result = try receiveMessages(fd, upTo: maximumCount, batch: batch)
            } catch {
                throw mapError(error, operation: maximumCount > 1 ? "recvmmsg" : "recv")
            }
            switch result {
            case .processed(var messages):
                // ATT PDUs are never empty, so an empty message is end of stream (or our own shutdown).
                if messages.last?.isEmpty == true {
                    messages.removeLast()
                    if messages.isEmpty {
                        // Our own shutdown reads as end of stream too: that is a close, not a disconnect.
                        if descriptor.isClosed { throw BearerError(.closed, "bearer closed") }
                        throw BearerError(.disconnected, "peer closed the link")
                    }
                    endOfStreamPending.withLock { $0 = true }
                }
                logger.trace("received PDUs", metadata: ["att.count": "\(messages.count)"])
                return messages
            case .wouldBlock:
                aboutToWait()
                do throws(Errno) {
                    try await fd.waitReadable()
                } catch {
                    throw mapWaitError(error)
                }
            }
        }
    }

    private func receiveMessages(_ fd: SocketDescriptor, upTo maximumCount: Int, batch: ReceiveBatch) throws(Errno)
        -> IOResult<[[UInt8]]>
    {
        if maximumCount > 1 { return try fd.receive(upTo: maximumCount, using: batch) }
        let buffer = UnsafeMutableRawBufferPointer(start: batch.storage, count: batch.slotSize)
        switch try fd.receive(into: buffer) {
        case .processed(let count): return .processed([Array(UnsafeRawBufferPointer(rebasing: buffer[..<count]))])
        case .wouldBlock: return .wouldBlock
        }
    }

    public func close() async {
        closeNow()
    }

    /// Synchronous close (idempotent): shutdown tells the peer, the waiting operations end with `.closed`, and the
    /// descriptor is closed once no operation uses it any more.
    public func closeNow() {
        descriptor.close()
    }

    deinit { closeNow() }

    private func mapError(_ error: Errno, operation: String) -> BearerError {
        if descriptor.isClosed { return BearerError(.closed, "bearer closed") }
        switch error {
        case .connectionReset, .brokenPipe, .socketNotConnected, .connectionAbort, .timedOut, .hostIsDown,
            .noRouteToHost:
            return BearerError(.disconnected, "\(operation): \(error)", errno: error.rawValue)
        case .messageTooLong:
            return BearerError(.pduTooLarge, "\(operation): \(error)", errno: error.rawValue)
        case .badFileDescriptor:
            return BearerError(.closed, "\(operation): \(error)", errno: error.rawValue)
        default:
            return BearerError(.system, "\(operation): \(error)", errno: error.rawValue)
        }
    }

    private func mapWaitError(_ error: Errno) -> BearerError {
        if descriptor.isClosed { return BearerError(.closed, "bearer closed") }
        if error == .canceled { return BearerError(.closed, "cancelled") }
        return BearerError(.system, "wait: \(error)", errno: error.rawValue)
    }
}
