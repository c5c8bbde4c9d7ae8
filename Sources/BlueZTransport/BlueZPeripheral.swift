import BLECore
import CBlueZShim
import Logging
import LinuxIO
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The peripheral role on one BlueZ adapter: the ATT fixed channel listens for centrals and the controller
/// advertises through legacy HCI advertising commands (docs/vm-test.md).
///
///     socket(AF_BLUETOOTH, SOCK_SEQPACKET|NONBLOCK|CLOEXEC, BTPROTO_L2CAP)
///     bind(sockaddr_l2 { adapter identity address, psm 0, cid 4, LE public })  listen(1)  accept() → ATT bearer
///
///     raw HCI (``HCIChannel``):  LE Set Advertising Enable 0
///                                [LE Set Random Address A]            (the advertisement's address is random)
///                                LE Set Advertising Parameters (ADV_IND, own address public or random)
///                                LE Set Advertising Data / LE Set Scan Response Data (``AdvertisingPayload``)
///                                LE Set Advertising Enable 1
///
/// The kernel matches an incoming LE link to the listener by the adapter's identity address, so the advertised
/// address can change (the buttonless jump moves a Nordic bootloader to address + 1) without touching the
/// listener. The controller stops advertising when a central connects: call ``advertise(_:)`` again after each
/// link. ``disconnect(handle:timeout:drainTimeout:)`` drops a link once its socket has handed the last PDUs to the
/// controller (the kernel otherwise keeps an idle LE link for seconds after the last socket closed). Advertising and
/// Disconnect need CAP_NET_RAW.
public actor BlueZPeripheral {
    public nonisolated let adapter: BlueZAdapterInfo
    /// The listening socket until closed (closing is idempotent: a descriptor number is never closed twice).
    /// The listening socket; closed once no `accept()` uses its number any more (``SharedDescriptor``).
    private nonisolated let listener: SharedDescriptor
    /// A second descriptor of each accepted link's socket, by connection handle, until `disconnect` drops the link:
    /// the bearer's own descriptor is closed when the device ends the link, and this one keeps the socket (and its
    /// send queue) there to be watched.
    private nonisolated let linkSockets = Mutex<[UInt16: SocketDescriptor]>([:])
    private var channel: HCIChannel?
    private var advertising: Advertisement?
    private let logger: Logger

    /// Opens the listener and the HCI channel on `adapter` (which must be up).
    public init(adapter: BlueZAdapterInfo, logger: Logger = Logger(label: "bledfu.bluez.peripheral")) throws(AdapterError) {
        func failure(_ error: Errno, _ operation: BlueZOperation) -> AdapterError {
            BlueZErrors.adapterError(errno: error.rawValue, operation: operation, adapter: adapter.name)
        }
        let fd: SocketDescriptor
        do {
            fd = try SocketDescriptor.open(domain: BLEDFU_AF_BLUETOOTH, type: SocketDescriptor.seqPacket, protocol: BLEDFU_BTPROTO_L2CAP)
        } catch {
            throw failure(error, .socket)
        }
        do throws(Errno) {
            var local = BlueZSocketAddress.l2capATT(adapter.address, type: BLEDFU_BDADDR_LE_PUBLIC)
            try withUnsafeBytes(of: &local) { (raw) throws(Errno) in try fd.bind(address: raw) }
            try fd.listen(backlog: 1)
        } catch {
            try? fd.close()  // already failing with `error`
            throw failure(error, .bind)
        }
        let channel: HCIChannel
        do throws(AdapterError) {
            channel = try HCIChannel.open(adapter: adapter)
        } catch {
            try? fd.close()
            throw error
        }
        self.adapter = adapter
        self.listener = SharedDescriptor(fd)
        self.channel = channel
        self.logger = logger
    }

    /// The advertisement on the air (nil before the first ``advertise(_:)`` and after ``stopAdvertising()``).
    public var currentAdvertisement: Advertisement? { advertising }

    /// Advertises `advertisement` (connectable, undirected, 100 ms interval) at its address: a random address is
    /// set with LE Set Random Address; a public one must be the adapter's own.
    public func advertise(_ advertisement: Advertisement) async throws(AdapterError) {
        var channel = try open()
        defer { self.channel = channel }
        _ = try await channel.send(.leSetAdvertisingEnable(false))  // "disallowed" when already off: fine
        let ownType: UInt8
        switch advertisement.peer.type {
        case .random:
            try await require(.leSetRandomAddress(advertisement.peer.address), on: &channel, "set the random address")
            ownType = 0x01
        case .public:
            guard adapter.address == nil || adapter.address == advertisement.peer.address else {
                throw AdapterError(
                    .badAddress,
                    "\(adapter.name) has the public address \(adapter.address?.description ?? "?"); it cannot advertise "
                        + "the public address \(advertisement.peer.address) (use a random address in the profile)")
            }
            ownType = 0x00
        }
        let payload = AdvertisingPayload(splitting: advertisement.data)
        if !payload.dropped.isEmpty {
            logger.debug("advertising data too long; dropped", metadata: ["structures": "\(payload.dropped.count)"])
        }
        try await require(.leSetAdvertisingParameters(ownAddressType: ownType), on: &channel, "set advertising parameters")
        try await require(.leSetAdvertisingData(payload.advertisingData), on: &channel, "set advertising data")
        try await require(.leSetScanResponseData(payload.scanResponse), on: &channel, "set scan response data")
        try await require(.leSetAdvertisingEnable(true), on: &channel, "enable advertising")
        advertising = advertisement
        logger.debug(
            "advertising", metadata: ["adapter": "\(adapter.name)", "address": "\(advertisement.peer)"])
    }

    /// Turns advertising off (best effort).
    public func stopAdvertising() async {
        guard var channel else { return }
        _ = try? await channel.send(.leSetAdvertisingEnable(false))
        self.channel = channel
        advertising = nil
    }

    /// Waits for the next central. The bearer's link info has the central's address and the connection handle.
    /// With `drainingBeforeDisconnect`, the peripheral keeps a second descriptor of the socket so that
    /// ``disconnect(handle:timeout:drainTimeout:)`` can wait for its send queue after the bearer closed.
    public nonisolated func accept(drainingBeforeDisconnect: Bool = false) async throws(BearerError) -> SocketBearer {
        guard let listening = listener.lease() else { throw BearerError(.closed, "listener closed") }
        defer { listener.release() }
        while true {
            if listener.isClosed { throw BearerError(.closed, "listener closed") }
            var remote = sockaddr_l2()
            var length = socklen_t(MemoryLayout<sockaddr_l2>.size)
            let result = withUnsafeMutableBytes(of: &remote) { raw in
                ioResultOrErrno {
                    system_accept(listening.rawValue, raw.baseAddress?.assumingMemoryBound(to: sockaddr.self), &length)
                }
            }
            switch result {
            case .failure(let error):
                if error == .badFileDescriptor || error == .invalidArgument { throw BearerError(.closed, "listener closed") }
                throw BearerError(.system, "accept: \(error)", errno: error.rawValue)
            case .success(.wouldBlock):
                do throws(Errno) {
                    try await listening.waitReadable()
                } catch {
                    throw BearerError(.closed, "listener closed")
                }
            case .success(.processed(let raw)):
                // SocketBearer makes the descriptor non-blocking and close-on-exec.
                let connection = SocketDescriptor(rawValue: raw)
                let peer = BlueZSocketAddress.address(remote.l2_bdaddr).map {
                    PeerAddress($0, type: remote.l2_bdaddr_type == BLEDFU_BDADDR_LE_RANDOM ? .random : .public)
                }
                let handle = L2CAPLinkQueries.connectionHandle(connection)
                if drainingBeforeDisconnect, let handle { keepLinkSocket(connection, handle: handle) }
                logger.debug("central connected", metadata: ["peer": "\(peer?.description ?? "?")", "handle": "\(handle ?? 0)"])
                return SocketBearer(
                    descriptor: connection, linkInfo: LinkInfo(peer: peer, connectionHandle: handle), logger: logger)
            }
        }
    }

    /// Drops the link of `handle` (HCI Disconnect, reason 0x13) once its socket's send queue is empty, so that the
    /// last PDUs the device sent (the Write Response before a reset) reach the controller first; waits at most
    /// `drainTimeout` for that, then up to `timeout` for Disconnection Complete. Returns false when the controller
    /// refused or did not confirm in time.
    @discardableResult
    public func disconnect(
        handle: UInt16, timeout: Duration = .seconds(2), drainTimeout: Duration = .seconds(1)
    ) async -> Bool {
        if let socket = linkSockets.withLock({ $0.removeValue(forKey: handle) }) {
            let outcome = await L2CAPSendQueue.waitUntilDrained(socket, timeout: drainTimeout, clock: ContinuousClock())
            logger.debug("send queue before disconnect", metadata: ["handle": "\(handle)", "queue": "\(outcome)"])
            try? socket.close()  // our second descriptor; the link goes with HCI Disconnect below
        }
        guard var channel else { return false }
        defer { self.channel = channel }
        guard let answer = try? await channel.send(.disconnect(handle: handle)), answer.status == .success else {
            return false
        }
        let event = try? await channel.waitForLinkEvent(timeout: timeout) {
            if case .disconnectionComplete(_, handle, _) = $0 { return true }
            return false
        }
        return event != nil
    }

    /// Stops advertising (without waiting for the answer), closes the listener (pending ``accept()`` calls end with
    /// `.closed`) and the HCI channel. Idempotent.
    public func close() {
        if let channel {
            _ = try? channel.socket.send(HCICommand.leSetAdvertisingEnable(false).packet)
            channel.close()
        }
        channel = nil
        advertising = nil
        closeListener()
        for socket in linkSockets.withLock({ state in defer { state = [:] }; return Array(state.values) }) {
            try? socket.close()
        }
    }

    /// Closes the listener from any thread (a signal handler): ``accept()`` ends with `.closed`.
    public nonisolated func closeListener() {
        listener.close()  // shutdown (a listening socket may answer ENOTCONN), then close once unused
    }

    /// Keeps a second descriptor of an accepted socket (see `linkSockets`); without one the drain is not waited for.
    private nonisolated func keepLinkSocket(_ connection: SocketDescriptor, handle: UInt16) {
        guard case .success(let raw) = valueOrErrno({ system_fcntl(connection.rawValue, F_DUPFD_CLOEXEC, 0) }) else {
            return
        }
        let replaced = linkSockets.withLock { $0.updateValue(SocketDescriptor(rawValue: raw), forKey: handle) }
        try? replaced?.close()  // a handle the controller reused after a link we never disconnected
    }

    private func open() throws(AdapterError) -> HCIChannel {
        guard let channel else { throw AdapterError(.system, "\(adapter.name): peripheral closed") }
        return channel
    }

    private func require(_ command: HCICommand, on channel: inout HCIChannel, _ what: String) async throws(AdapterError) {
        let answer = try await channel.send(command)
        guard answer.status == .success else {
            throw AdapterError(.system, "\(adapter.name) refused to \(what): \(answer.status)")
        }
    }
}

/// Socket queries on a connected L2CAP LE socket.
enum L2CAPLinkQueries {
    /// L2CAP_CONNINFO's `hci_handle` (nil when the kernel does not say).
    static func connectionHandle(_ socket: SocketDescriptor) -> UInt16? {
        var info = l2cap_conninfo()
        var length = socklen_t(MemoryLayout<l2cap_conninfo>.size)
        switch valueOrErrno({ system_getsockopt(socket.rawValue, BLEDFU_SOL_L2CAP, BLEDFU_L2CAP_CONNINFO, &info, &length) }) {
        case .success: return bledfu_btohs(info.hci_handle)
        case .failure: return nil
        }
    }
}

/// Waiting until an L2CAP socket has handed what it queued to the controller.
public enum L2CAPSendQueue {
    /// How a wait ended.
    public enum Outcome: Equatable, Sendable, CustomStringConvertible {
        /// Nothing queued any more, seen at the `polls`-th query.
        case drained(polls: Int)
        /// `queuedBytes` (buffer accounting, not payload) were still queued when the time was up or the wait was
        /// cancelled.
        case timedOut(queuedBytes: Int)
        /// The kernel did not answer (the socket is gone, or it is no Bluetooth socket).
        case failed(Errno)

        public var description: String {
            switch self {
            case .drained(let polls): "drained after \(polls) queries"
            case .timedOut(let queued): "\(queued) bytes still queued"
            case .failed(let error): "unknown: \(error)"
            }
        }
    }

    /// Queries ioctl(TIOCOUTQ) every `interval` until the send buffer is entirely free, at most `timeout` on `clock`.
    /// For Bluetooth sockets the kernel answers the free space (`sk_sndbuf` less the bytes of PDUs not yet handed to
    /// the HCI driver), so the queue is empty when the answer equals SO_SNDBUF.
    public static func waitUntilDrained<C: Clock<Duration>>(
        _ socket: SocketDescriptor, timeout: Duration, interval: Duration = .milliseconds(5), clock: C
    ) async -> Outcome {
        let capacity: CInt
        do throws(Errno) {
            capacity = try socket.getOption(level: SOL_SOCKET, name: SO_SNDBUF)
        } catch {
            return .failed(error)
        }
        let deadline = clock.now.advanced(by: timeout)
        var polls = 0
        while true {
            var free: CInt = 0
            if case .failure(let error) = valueOrErrno({ system_ioctlSendQueue(socket.rawValue, &free) }) {
                return .failed(error)
            }
            polls += 1
            let queued = Int(capacity) - Int(free)
            if queued <= 0 { return .drained(polls: polls) }
            guard clock.now < deadline else { return .timedOut(queuedBytes: queued) }
            do {
                try await clock.sleep(for: interval)
            } catch {
                return .timedOut(queuedBytes: queued)  // cancelled: the caller is stopping, disconnect now
            }
        }
    }
}
