import BLECore
import CBlueZShim

/// Builders for the kernel socket addresses and option structs the BlueZ transport passes to syscalls.
///
/// `struct sockaddr_l2` (14 bytes, not packed; pinned by CShimLayoutTests):
///
///     l2_family u16 (31) @0 | l2_psm u16 LE @2 | l2_bdaddr[6] LE @4 | l2_cid u16 LE @10 | l2_bdaddr_type u8 @12 | pad @13
public enum BlueZSocketAddress {
    /// The LE ATT fixed-channel address: psm 0, cid 4, the given LE address type.
    /// - Parameters:
    ///   - address: nil for BDADDR_ANY (bind to any adapter).
    ///   - type: BDADDR_LE_PUBLIC (1) or BDADDR_LE_RANDOM (2).
    public static func l2capATT(_ address: BluetoothAddress?, type: UInt8) -> sockaddr_l2 {
        var sa = sockaddr_l2()
        sa.l2_family = sa_family_t(BLEDFU_AF_BLUETOOTH)
        sa.l2_psm = bledfu_htobs(0)
        sa.l2_bdaddr = address.map(bdaddr) ?? bledfu_bdaddr_any()
        sa.l2_cid = bledfu_htobs(BLEDFU_ATT_CID)
        sa.l2_bdaddr_type = type
        return sa
    }

    /// The kernel's LE address type for a peer.
    public static func addressType(_ type: AddressType) -> UInt8 {
        switch type {
        case .public: BLEDFU_BDADDR_LE_PUBLIC
        case .random: BLEDFU_BDADDR_LE_RANDOM
        }
    }

    /// `bdaddr_t` (least significant byte first) from an address written most significant first.
    public static func bdaddr(_ address: BluetoothAddress) -> bdaddr_t {
        let b = address.littleEndianBytes
        return bdaddr_t(b: (b[0], b[1], b[2], b[3], b[4], b[5]))
    }

    /// The address in a `bdaddr_t`; nil for BDADDR_ANY.
    public static func address(_ value: bdaddr_t) -> BluetoothAddress? {
        let b = [value.b.0, value.b.1, value.b.2, value.b.3, value.b.4, value.b.5]
        if b.allSatisfy({ $0 == 0 }) { return nil }
        return BluetoothAddress(littleEndianBytes: b)
    }

    /// `struct sockaddr_hci` for the raw channel of one adapter: `hci_family u16 | hci_dev u16 | hci_channel u16`.
    public static func hciRaw(device: UInt16) -> sockaddr_hci {
        var sa = sockaddr_hci()
        sa.hci_family = sa_family_t(BLEDFU_AF_BLUETOOTH)
        sa.hci_dev = device
        sa.hci_channel = BLEDFU_HCI_CHANNEL_RAW
        return sa
    }

    /// `struct hci_filter` (16 bytes: type_mask u32 | event_mask[2] u32 | opcode u16 | pad) passing event packets
    /// with the given event codes.
    public static func hciFilter(events: [UInt8]) -> hci_filter {
        var filter = hci_filter()
        filter.type_mask = 1 << UInt32(HCI_EVENT_PKT)
        for event in events {
            if event < 32 {
                filter.event_mask.0 |= 1 << UInt32(event)
            } else if event < 64 {
                filter.event_mask.1 |= 1 << UInt32(event - 32)
            }
        }
        return filter
    }

    /// Raw bytes of a C value (for tests and syscall traces).
    public static func bytes<T>(of value: T) -> [UInt8] {
        withUnsafeBytes(of: value) { Array($0) }
    }
}
