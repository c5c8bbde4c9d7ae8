import BLECore
import GATT

/// The connection a family works on: the GATT client (and its ATT client) over one ATT bearer, and what the link
/// reports about itself. The updater opens it (connect, MTU exchange, captures) and closes it; a family only reads,
/// writes and subscribes.
public struct DFULink: Sendable {
    public let gatt: GATTClient
    /// The peer this link goes to.
    public let peer: PeerAddress

    public init(gatt: GATTClient, peer: PeerAddress) {
        self.gatt = gatt
        self.peer = peer
    }

    /// The ATT client under ``gatt``.
    public var att: ATTClient { gatt.att }

    /// What the bearer reports (connection handle, the largest PDU the link carries).
    public var info: LinkInfo { gatt.att.bearer.linkInfo }

    /// The ATT_MTU negotiated on this link.
    public var mtu: Int { get async { await gatt.att.mtu } }

    /// Closes the link (idempotent).
    public func close() async { await gatt.att.close() }
}
