import BLECore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why an LE `connect()` on the ATT channel failed, from the errno and what else is known at that moment
/// (/work/shared/reference/many-links.md §2.2-2.4: the kernel turns the controller's HCI status into an errno with
/// `bt_to_errno()`, net/bluetooth/lib.c, identical in Linux 6.1 and 6.12, so several unrelated causes share one
/// errno and a few errnos mean something other than their name).
public struct BlueZConnectFailure: Sendable, Hashable {
    /// When the errno arrived.
    public enum Phase: Sendable, Hashable {
        /// From `connect()` itself, before any HCI command went out.
        case immediate
        /// From `SO_ERROR` after the non-blocking connect's wait: the controller's (or the kernel's) verdict.
        case afterWait
    }

    public var errno: Int32
    public var phase: Phase
    /// The adapter already had a link to this peer (HCIGETCONNLIST), nil when unknown.
    public var linkToPeerExists: Bool?
    /// LE links the adapter had when the connect failed, nil when unknown.
    public var adapterLELinks: Int?

    public init(errno: Int32, phase: Phase, linkToPeerExists: Bool? = nil, adapterLELinks: Int? = nil) {
        self.errno = errno
        self.phase = phase
        self.linkToPeerExists = linkToPeerExists
        self.adapterLELinks = adapterLELinks
    }

    /// The real cause as one `AdapterError`; the errno the kernel gave stays in `errno`.
    public func error(adapter: String, peer: PeerAddress) -> AdapterError {
        let links = adapterLELinks.map { "\(adapter) has \($0) LE link\($0 == 1 ? "" : "s")" } ?? "\(adapter)"
        switch errno {
        case EMLINK:
            // bt_to_errno: 0x09 Connection Limit Exceeded, 0x0A Synchronous Connection Limit Exceeded.
            return AdapterError(
                .noFreeLink,
                "\(links) and no free link: its controller is at its connection limit (HCI 0x09 Connection Limit "
                    + "Exceeded, reported as EMLINK); \(peer) can be tried again when a link ends",
                errno: errno)
        case ENOMEM where phase == .afterWait:
            // 0x07 Memory Capacity Exceeded: a Zephyr controller with no free connection context (ull_central.c).
            return AdapterError(
                .noFreeLink,
                "\(links) and no free link: its controller has no room for another connection (HCI 0x07 Memory "
                    + "Capacity Exceeded, reported as ENOMEM); \(peer) can be tried again when a link ends",
                errno: errno)
        case ECONNREFUSED where phase == .afterWait && (adapterLELinks ?? 0) > 0:
            // 0x0D Rejected due to Limited Resources (also 0x0E, 0x0F, 0x1B): a Raspberry Pi 3B+ at its 10th link.
            return AdapterError(
                .noFreeLink,
                "\(links) and its controller refused another (HCI 0x0D Limited Resources and kin, reported as "
                    + "ECONNREFUSED); \(peer) can be tried again when a link ends",
                errno: errno)
        case ECONNREFUSED where phase == .afterWait:
            // The scan-phase channel timer (SO_SNDTIMEO, 40 s by default) ends as ECONNREFUSED, not ETIMEDOUT
            // (l2cap_chan_timeout); a controller refusal (0x0D) of a first link is the other case.
            return AdapterError(
                .deviceNotFound,
                "\(peer) was not seen advertising before the kernel gave up (or the controller refused: HCI 0x0D, "
                    + "both reported as ECONNREFUSED)",
                errno: errno)
        case EBUSY where phase == .afterWait:
            return AdapterError(
                .adapterBusy,
                "\(adapter) refused to create the connection to \(peer) now (HCI 0x0C Command Disallowed, reported as "
                    + "EBUSY: the controller is scanning or creating another connection); try again",
                errno: errno)
        case EBUSY where linkToPeerExists == false:
            // l2cap_chan_connect → hci_connect_le (directed advertising path) refuses while another creation is
            // pending when the adapter has the mgmt Advertising setting on.
            return AdapterError(
                .adapterBusy,
                "\(adapter) is advertising (mgmt Advertising setting, e.g. `bluetoothctl advertise on`) while it "
                    + "creates another connection, and the kernel then refuses a second one (EBUSY); try again, or "
                    + "turn advertising off",
                errno: errno)
        case EBUSY:
            return AdapterError(
                .busy, "another program (usually bluetoothd) already holds the ATT channel of the link to \(peer) (EBUSY)",
                errno: errno)
        case ENOSYS:
            // bt_to_errno's default branch: 0x3E Connection Failed to be Established, 0x22 LL Response Timeout,
            // 0x28, 0x3B, 0x3D, 0x1F and every other unlisted status.
            return AdapterError(
                .connectionTimeout,
                "the link to \(peer) failed to be established (HCI 0x3E Connection Failed to be Established or "
                    + "another controller status the kernel reports as ENOSYS, 'Function not implemented'): the "
                    + "device stopped answering or moved out of range",
                errno: errno)
        case ETIMEDOUT where phase == .afterWait:
            return AdapterError(
                .connectionTimeout,
                "\(peer) was seen but the connection was not created within the kernel's LE create timeout "
                    + "(4 s on Linux 6.1, 20 s on 6.12; ETIMEDOUT): is it in range?",
                errno: errno)
        case EPROTO, EIO:
            // 0x19/0x1E/0x23/0x24/0x25 → EPROTO (a bcm43438 refusing a second Create Connection with an LL error),
            // 0x03 Hardware Failure → EIO (a BCM4387 refusing it): the controller could not take the request now.
            let status = errno == EIO ? "HCI 0x03 Hardware Failure, EIO" : "a link-layer error, EPROTO"
            return AdapterError(
                .adapterBusy,
                "\(adapter)'s controller failed the connection to \(peer) (\(status); some controllers answer so to a "
                    + "second connection while one is being created); try again",
                errno: errno)
        default:
            return BlueZErrors.adapterError(errno: errno, operation: .connect, adapter: adapter, peer: peer)
        }
    }
}
