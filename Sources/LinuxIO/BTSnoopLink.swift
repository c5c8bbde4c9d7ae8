import BLECore
import Synchronization

/// Links in a capture: each link of a capture file starts with an HCI LE Connection Complete event (its handle, the
/// peer's address and address type) and ends with a Disconnection Complete event, and its ATT PDUs carry its
/// connection handle, so that Wireshark and `btmon -r` tell one link from the next (the application's from the
/// bootloader's after a jump): Wireshark gives each ACL record the frame of its connection (`bthci_acl.connect_in`)
/// and the peer's address.
///
/// Handles: a link's real handle when the transport knows it (BlueZ); otherwise the lowest handle no open link of
/// the file uses, 0x0000 for links one after the other, as a controller reuses a freed handle. That choice keeps
/// `btmon -r` of BlueZ 5.66 (Debian 12) from crashing: 5.66 registers a connection only when the reading machine's
/// hci0 is up (`assign_handle` → `hci_devba`), and decoding a Read By Type Request for a type it has a read decoder
/// for (0x2803 Characteristic, 0x2902 CCCD, …: every characteristic discovery) dereferences the missing
/// connection's data (SIGSEGV in `att_read_type_req`; fixed in BlueZ 5.67 by commit 35947e2, "monitor/att: Fix crash
/// when accessing packet_conn"). Its empty connection slots have handle 0x0000, so a link on handle 0x0000 finds one.
/// A capture of BlueZ links (real handles) is read by btmon 5.66 on a machine whose hci0 is up, or by btmon ≥ 5.67
/// (docs/captures.md).
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
    /// is the link's real handle when the transport knows it (BlueZ); otherwise the link gets the lowest handle no
    /// open link uses (0x0000 for links one after the other; see the type's notes on btmon 5.66).
    public func link(peer: PeerAddress?, connectionHandle: UInt16?) -> BTSnoopLink {
        let handle = links.withLock { open -> UInt16 in
            var handle = connectionHandle.map { $0 & 0x0FFF } ?? 0
            if connectionHandle == nil {
                while open.contains(handle) && handle < 0x0EFF { handle += 1 }
            }
            open.insert(handle)
            return handle
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
        links.withLock { _ = $0.remove(handle) }
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
