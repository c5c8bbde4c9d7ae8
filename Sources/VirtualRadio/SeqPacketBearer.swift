import BLECore
import LinuxIO
import SystemPackage

/// The virtual radio's and tests' name for a ``SocketBearer`` over AF_UNIX SOCK_SEQPACKET.
public enum SeqPacketBearer {
    /// A connected pair of bearers over `socketpair(AF_UNIX, SOCK_SEQPACKET)`: what one sends, the other receives.
    /// The first end is the central, the second the device; the link's security can be raised as on the virtual
    /// radio (docs/virtual-radio.md §4.1; the device grants encryption). Both ends live in one process, so the
    /// central waits generously for the answer (`securityTimeout`): the answer never fails to come, it may only wait
    /// for a thread.
    public static func makePair(linkInfo: LinkInfo = LinkInfo(), securityTimeout: Duration = .seconds(120)) throws
        -> (any ATTBearer, any ATTBearer)
    {
        let (a, b) = try makeSocketPair(linkInfo: linkInfo)
        return (
            VirtualSecureLink(a, role: .central(timeout: securityTimeout)),
            VirtualSecureLink(b, role: .peripheral(maximum: .medium))
        )
    }

    /// Like ``makePair(linkInfo:)``, typed (gives access to the sockets).
    public static func makeSocketPair(linkInfo: LinkInfo = LinkInfo()) throws(Errno) -> (SocketBearer, SocketBearer) {
        let (a, b) = try SocketDescriptor.seqPacketPair()
        return (SocketBearer(descriptor: a, linkInfo: linkInfo), SocketBearer(descriptor: b, linkInfo: linkInfo))
    }
}
