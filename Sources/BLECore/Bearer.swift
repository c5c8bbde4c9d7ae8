/// Why a bearer stopped or refused an operation.
public struct BearerError: CodedError, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The peer closed the link or the link was lost.
        public static let disconnected = Code(name: "disconnected")
        /// This side closed the bearer.
        public static let closed = Code(name: "closed")
        /// A PDU larger than the link allows.
        public static let pduTooLarge = Code(name: "pduTooLarge")
        /// The operating system refused (errno in the reason).
        public static let system = Code(name: "system")
        /// An operation did not finish in time.
        public static let timeout = Code(name: "timeout")
        /// The link cannot do what was asked (a link without security levels asked to raise them).
        public static let unsupported = Code(name: "unsupported")
        public var description: String { name }
    }

    public var code: Code
    public var reason: String
    /// errno, when the operating system reported the failure.
    public var errno: Int32?

    public init(_ code: Code, _ reason: String = "", errno: Int32? = nil) {
        self.code = code
        self.reason = reason
        self.errno = errno
    }


    public var description: String { reason.isEmpty ? "\(code)" : "\(code): \(reason)" }
}

/// What a link reports about itself (all optional: a virtual link may not know).
public struct LinkInfo: Sendable, Hashable, Codable {
    public var peer: PeerAddress?
    public var connectionHandle: UInt16?
    /// The largest ATT PDU the link can carry (L2CAP MTU for CID 4), if known.
    public var maximumPDUSize: Int?
    /// On a device's end of a virtual radio link: the central's adapter, when the central named it
    /// (docs/virtual-radio.md §4.2); its links share that adapter's controller.
    public var centralAdapter: String?
    public init(peer: PeerAddress? = nil, connectionHandle: UInt16? = nil, maximumPDUSize: Int? = nil) {
        self.peer = peer
        self.connectionHandle = connectionHandle
        self.maximumPDUSize = maximumPDUSize
    }
}

/// One ATT bearer: a reliable, ordered, message-preserving link carrying exactly one ATT PDU per message, as the
/// L2CAP fixed channel CID 4 does (Core Vol 3 Part F 3.2.11). Implemented by the BlueZ L2CAP socket, the virtual
/// radio's SEQPACKET socket and the in-memory pair used by unit tests.
public protocol ATTBearer: AnyObject, Sendable {
    /// Sends one PDU. Suspends while the transmit queue is full (back-pressure); never drops.
    func send(_ pdu: [UInt8]) async throws(BearerError)
    /// The next PDU from the peer. Throws `.disconnected` once the peer is gone, `.closed` after `close()`.
    func receive() async throws(BearerError) -> [UInt8]
    /// Closes the link (a disconnect). Idempotent; pending `receive()` calls end with `.closed`.
    func close() async
    var linkInfo: LinkInfo { get }
    /// Sends `pdus` in order, exactly as that many `send(_:)` calls would (same back-pressure, same checks), in as
    /// few system calls as the link allows. On a failure the PDUs before the failing one have been sent.
    func send(burst pdus: [[UInt8]]) async throws(BearerError)
    /// Sends one message per payload, each `prefix` followed by the payload (a Write Command: its 3-byte ATT header
    /// and a slice of the image), exactly as ``send(burst:)`` with the PDUs put together would, without putting them
    /// together first: a socket writes header and payload straight into a reused sendmmsg(2) buffer.
    func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError)
    /// The next PDUs from the peer, in order: at least one (suspending like `receive()`), at most `maximumCount`,
    /// never more than have already arrived. Ends like `receive()`.
    func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]]
    /// The link's security now.
    func securityLevel() async -> LinkSecurityLevel
    /// Asks for at least `level` (encryption with a stored bond or pairing, as the platform does it) and returns the
    /// level in force afterwards, which is lower when the peer or the platform refused. Throws `.unsupported` on a
    /// link that has no security levels, or why the attempt failed.
    func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel
}

extension ATTBearer {
    /// One `send(_:)` per PDU.
    public func send(burst pdus: [[UInt8]]) async throws(BearerError) {
        for pdu in pdus { try await send(pdu) }
    }

    /// The PDUs put together, then ``send(burst:)``.
    public func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError) {
        try await send(burst: payloads.map { prefix + $0 })
    }

    /// One `receive()`.
    public func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        [try await receive()]
    }

    /// A link that knows no security levels is unencrypted.
    public func securityLevel() async -> LinkSecurityLevel { .low }

    /// A link that knows no security levels cannot raise them.
    public func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        throw BearerError(.unsupported, "this link has no security levels")
    }
}

/// Sees every PDU crossing a bearer (for captures and `--verbose` traces).
public protocol PDUObserver: Sendable {
    /// - Parameter sent: true for PDUs this side sent.
    func observe(pdu: [UInt8], sent: Bool)
    /// The link ended: closed by this side, or lost (`byPeer`: the peer or the radio ended it). Called once.
    func linkEnded(byPeer: Bool)
}

extension PDUObserver {
    public func linkEnded(byPeer: Bool) {}
}

extension BearerError.Code: RawRepresentable {
    public init(rawValue: String) { self.init(name: rawValue) }
    public var rawValue: String { name }
}

extension BearerError {
    /// ``CodedError``'s one line: the reason.
    public var message: String { reason }
}
