import BLECore
import Synchronization

/// Counts the DFU bytes a host writes, from the ATT PDUs it sends (a ``PDUObserver`` on the host's bearer): Write
/// Command values (the Packet characteristic) by object type, the type taken from the last Secure DFU Select (`06`)
/// or Create (`01`) written to the Control Point with a Write Request.
///
///     52 hh hh <value>     Write Command: value bytes counted (init packet or firmware)
///     12 hh hh 06|01 tt …  Write Request: Select / Create of object type tt (01 command, 02 data)
public final class PacketCounter: PDUObserver {
    public struct Counts: Sendable, Hashable {
        public var initBytes = 0
        public var dataBytes = 0
        public var packets = 0
        /// The object type of the last Select or Create (0x01 command, 0x02 data).
        public var currentType: UInt8 = 0

        public init() {}
    }

    private let state = Mutex(Counts())
    private let next: (any PDUObserver)?

    /// - Parameter next: also sees every PDU (a capture, a recorder).
    public init(forwardingTo next: (any PDUObserver)? = nil) { self.next = next }

    public var counts: Counts { state.withLock { $0 } }

    public func observe(pdu: [UInt8], sent: Bool) {
        next?.observe(pdu: pdu, sent: sent)
        guard sent, let opcode = pdu.first else { return }
        state.withLock { counts in
            switch opcode {
            case 0x52 where pdu.count >= 3:
                counts.packets += 1
                if counts.currentType == 0x02 { counts.dataBytes += pdu.count - 3 } else { counts.initBytes += pdu.count - 3 }
            case 0x12 where pdu.count >= 5 && (pdu[3] == 0x06 || pdu[3] == 0x01):
                counts.currentType = pdu[4]
            default: break
            }
        }
    }
}
