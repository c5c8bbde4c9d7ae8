import BLECore
import Synchronization

/// Links in a capture: each link of a capture file starts with an HCI LE Connection Complete event (its handle, the
/// peer's address and address type) and ends with a Disconnection Complete event, and its ATT PDUs carry its own
/// connection handle, so that Wireshark and `btmon -r` tell one link from the next (the application's from the
/// bootloader's after a jump).
///
/// LE Connection Complete (Core Vol 4 Part E 7.7.65.1), as an H4 event record (flags 0b11: event, received):
///
///     04 3E 13                H4 event, LE Meta Event, 19 parameter bytes
///     01 00                   subevent LE Connection Complete, status success
///     HH HH                   connection handle, little-endian
///     00                      role: central
///     TT                      peer address type (0 public, 1 random)
///     AA AA AA AA AA AA       peer address, little-endian
///     18 00 00 00 48 00 00    interval 30 ms, latency 0, supervision timeout 720 ms, clock accuracy (not known
///                             to the host over L2CAP sockets: nominal values)
///
/// Disconnection Complete (7.7.5): `04 05 04 00 HH HH RR`, reason 0x16 (terminated by the local host) when this side
/// closed the link, 0x13 (remote user terminated) when the peer or the radio ended it.
extension BTSnoopWriter {
    /// Starts a link in the capture: writes its LE Connection Complete and returns the observer for its PDUs (pass
    /// it to a ``CapturingBearer``; the bearer ends the link when it closes or loses the link). `connectionHandle`
    /// is the link's real handle when the transport knows it (BlueZ); otherwise the writer gives each link a handle
    /// of its own (0x0040, 0x0041, …).
    public func link(peer: PeerAddress?, connectionHandle: UInt16?) -> BTSnoopLink {
        let handle = links.withLock { links -> UInt16 in
            var handle = connectionHandle.map { $0 & 0x0FFF }
            if handle == nil {
                var candidate = links.next
                while links.open.contains(candidate) { candidate = (candidate &+ 1) & 0x0EFF }
                links.next = (candidate &+ 1) & 0x0EFF
                handle = candidate
            }
            let chosen = handle ?? Self.defaultHandle
            links.open.insert(chosen)
            return chosen
        }
        writeEvent(code: 0x3E, parameters: Self.connectionComplete(handle: handle, peer: peer))
        return BTSnoopLink(writer: self, handle: handle)
    }

    /// The parameters of an LE Connection Complete event.
    public static func connectionComplete(handle: UInt16, peer: PeerAddress?) -> [UInt8] {
        var writer = ByteWriter(capacity: 19)
        writer.write(UInt8(0x01))  // LE Connection Complete
        writer.write(UInt8(0x00))  // success
        writer.write(handle & 0x0FFF)
        writer.write(UInt8(0x00))  // central
        writer.write(UInt8(peer?.type == .public ? 0x00 : 0x01))
        writer.write(contentsOf: Array((peer?.address.bytes ?? [0, 0, 0, 0, 0, 0]).reversed()))
        writer.write(UInt16(0x0018))  // interval, 1.25 ms units
        writer.write(UInt16(0x0000))  // latency
        writer.write(UInt16(0x0048))  // supervision timeout, 10 ms units
        writer.write(UInt8(0x00))  // central clock accuracy
        return writer.bytes
    }

    /// The parameters of a Disconnection Complete event.
    public static func disconnectionComplete(handle: UInt16, reason: UInt8) -> [UInt8] {
        var writer = ByteWriter(capacity: 4)
        writer.write(UInt8(0x00))
        writer.write(handle & 0x0FFF)
        writer.write(reason)
        return writer.bytes
    }

    /// One HCI event record (H4 type 04, flags: event, received).
    public static func eventRecord(code: UInt8, parameters: [UInt8], unixMicroseconds: Int64) -> [UInt8] {
        let packet = [0x04, code, UInt8(truncatingIfNeeded: parameters.count)] + parameters
        var record = ByteWriter(capacity: 24 + packet.count)
        let length = UInt32(packet.count)
        record.write(contentsOf: bigEndian(length))
        record.write(contentsOf: bigEndian(length))
        record.write(contentsOf: bigEndian(UInt32(0b11)))
        record.write(contentsOf: bigEndian(UInt32(0)))
        record.write(contentsOf: bigEndian(UInt64(bitPattern: unixMicroseconds + unixEpochOffset)))
        record.write(contentsOf: packet)
        return record.bytes
    }

    func endLink(handle: UInt16, byPeer: Bool) {
        writeEvent(code: 0x05, parameters: Self.disconnectionComplete(handle: handle, reason: byPeer ? 0x13 : 0x16))
        links.withLock { _ = $0.open.remove(handle) }
    }

    /// The attribute types of BlueZ 5.66 btmon's GATT handlers with a read decoder (`monitor/att.c gatt_handlers`).
    /// btmon 5.66 decoding a Read By Type Request for one of them dereferences the connection's data, which it has
    /// only for connections whose local adapter (`hci_devba` on the reading machine's hciN) is up: reading a file
    /// anywhere else it crashes (SIGSEGV in `att_read_type_req`). Fixed in BlueZ 5.67 by commit 35947e2 ("monitor/
    /// att: Fix crash when accessing packet_conn"); Debian 12 ships 5.66. Captures leave these requests out (their
    /// responses stay) so that `btmon -r` of Debian 12 reads them (docs/captures.md).
    static let btmon566ReadHandlers: Set<UInt16> = [
        0x2803, 0x2902, 0x2BC4, 0x2BC5, 0x2BC9, 0x2BCA, 0x2BCB, 0x2BCC, 0x2BCD, 0x2BCE, 0x2B7D, 0x2B7F, 0x2B93,
        0x2B97, 0x2B98, 0x2B99, 0x2B9A, 0x2B9B, 0x2BA1, 0x2BA2, 0x2BA3, 0x2BA5, 0x2BBA,
    ]

    /// A Read By Type Request (0x08) for one of ``btmon566ReadHandlers`` (16-bit, or 128-bit in the Bluetooth base).
    public static func tripsBtmon566(_ pdu: [UInt8]) -> Bool {
        guard pdu.first == 0x08 else { return false }
        let base: [UInt8] = [0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00]
        let type: UInt16
        switch pdu.count {
        case 7: type = UInt16(pdu[5]) | UInt16(pdu[6]) << 8
        case 21 where Array(pdu[5..<17]) == base && pdu[19] == 0 && pdu[20] == 0:
            type = UInt16(pdu[17]) | UInt16(pdu[18]) << 8
        default: return false
        }
        return btmon566ReadHandlers.contains(type)
    }
}

/// One link's PDUs in a capture (``BTSnoopWriter/link(peer:connectionHandle:)``).
public final class BTSnoopLink: PDUObserver {
    public let writer: BTSnoopWriter
    public let handle: UInt16
    private let ended = Mutex(false)

    init(writer: BTSnoopWriter, handle: UInt16) {
        self.writer = writer
        self.handle = handle
    }

    public func observe(pdu: [UInt8], sent: Bool) {
        writer.write(pdu: pdu, sent: sent, handle: handle)
    }

    public func linkEnded(byPeer: Bool) {
        let first = ended.withLock { ended in
            defer { ended = true }
            return !ended
        }
        if first { writer.endLink(handle: handle, byPeer: byPeer) }
    }
}
