import BLECore
import BlueZTransport
import CBlueZShim
import CLinuxShim
import Testing

/// Pins the kernel struct layouts Swift sees through CBlueZShim (linux-ble.md §1.1, checked against C).
@Suite(.timeLimit(.minutes(5))) struct CShimLayoutTests {
    @Test func sockaddrL2() {
        #expect(MemoryLayout<sockaddr_l2>.size == 14)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_family) == 0)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_psm) == 2)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_bdaddr) == 4)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_cid) == 10)
        #expect(MemoryLayout<sockaddr_l2>.offset(of: \.l2_bdaddr_type) == 12)
        #expect(MemoryLayout<bdaddr_t>.size == 6)
    }

    @Test func securityAndConnInfo() {
        #expect(MemoryLayout<bt_security>.size == 2)
        #expect(MemoryLayout<bt_security>.offset(of: \.key_size) == 1)
        #expect(MemoryLayout<l2cap_conninfo>.size == 6)
        #expect(MemoryLayout<l2cap_conninfo>.offset(of: \.hci_handle) == 0)
        #expect(MemoryLayout<l2cap_conninfo>.offset(of: \.dev_class) == 2)
    }

    @Test func hciSocketStructs() {
        #expect(MemoryLayout<sockaddr_hci>.size == 6)
        #expect(MemoryLayout<sockaddr_hci>.offset(of: \.hci_dev) == 2)
        #expect(MemoryLayout<sockaddr_hci>.offset(of: \.hci_channel) == 4)
        #expect(MemoryLayout<hci_filter>.size == 16)
        #expect(MemoryLayout<hci_filter>.offset(of: \.event_mask) == 4)
        #expect(MemoryLayout<hci_filter>.offset(of: \.opcode) == 12)
        #expect(MemoryLayout<hci_dev_info>.size == 92)
        #expect(MemoryLayout<hci_dev_info>.offset(of: \.bdaddr) == 10)
        #expect(MemoryLayout<hci_dev_info>.offset(of: \.flags) == 16)
        #expect(MemoryLayout<bledfu_hci_dev_list>.size == 132)
        #expect(MemoryLayout<bledfu_hci_dev_list>.offset(of: \.dev_req) == 4)
        #expect(MemoryLayout<hci_dev_req>.size == 8)
    }

    /// The legacy report header HCIEvent's byte parser walks: evt_type@0, bdaddr_type@1, bdaddr@2, length@8, data@9.
    @Test func legacyAdvertisingReportHeader() {
        #expect(MemoryLayout<le_advertising_info>.size == 9)
        #expect(MemoryLayout<le_advertising_info>.offset(of: \.bdaddr_type) == 1)
        #expect(MemoryLayout<le_advertising_info>.offset(of: \.bdaddr) == 2)
        #expect(MemoryLayout<le_advertising_info>.offset(of: \.length) == 8)
    }

    @Test func constantsAndHelpers() {
        #expect(BLEDFU_AF_BLUETOOTH == 31)
        #expect(BLEDFU_BTPROTO_L2CAP == 0)
        #expect(BLEDFU_BTPROTO_HCI == 1)
        #expect(BLEDFU_SOL_BLUETOOTH == 274)
        #expect(BLEDFU_SOL_L2CAP == 6)
        #expect(BLEDFU_SOL_HCI == 0)
        #expect(BLEDFU_BT_SECURITY == 4)
        #expect(BLEDFU_L2CAP_CONNINFO == 2)
        #expect(BLEDFU_HCI_FILTER == 2)
        #expect(BLEDFU_HCIGETDEVLIST == 0x8004_48D2)
        #expect(BLEDFU_HCIGETDEVINFO == 0x8004_48D3)
        #expect(BLEDFU_HCI_UP_BIT == 0)
        #expect(bledfu_htobs(0x1234) == UInt16(0x1234).littleEndian)
        #expect(BlueZSocketAddress.bytes(of: bledfu_bdaddr_any()) == [0, 0, 0, 0, 0, 0])
    }

    /// sockaddr_l2 for C0:FF:EE:00:00:01, LE random: family 31, psm 0, bdaddr reversed, cid 4, type 2.
    @Test func l2capATTAddressBytes() throws {
        let address = try #require(BluetoothAddress("C0:FF:EE:00:00:01"))
        let sa = BlueZSocketAddress.l2capATT(address, type: BLEDFU_BDADDR_LE_RANDOM)
        #expect(Array(BlueZSocketAddress.bytes(of: sa).prefix(13))
            == [31, 0, 0, 0, 0x01, 0x00, 0x00, 0xEE, 0xFF, 0xC0, 4, 0, 2])
        #expect(BlueZSocketAddress.address(sa.l2_bdaddr) == address)
        #expect(BlueZSocketAddress.address(bledfu_bdaddr_any()) == nil)
    }

    /// hci_filter for events 0x0E, 0x0F, 0x3E: type_mask bit 4 (event packets), event_mask[0] bits 14/15, [1] bit 30.
    @Test func hciFilterBits() {
        let filter = BlueZSocketAddress.hciFilter(events: [0x0E, 0x0F, 0x3E])
        #expect(filter.type_mask == 0x10)
        #expect(filter.event_mask.0 == 0x0000_C000)
        #expect(filter.event_mask.1 == 0x4000_0000)
        let sa = BlueZSocketAddress.hciRaw(device: 1)
        #expect(BlueZSocketAddress.bytes(of: sa) == [31, 0, 1, 0, 0, 0])
    }
}

/// Pins the Linux struct layouts LinuxIO uses through CLinuxShim: `struct epoll_event` as the kernel lays it out
/// (packed on x86_64: 12 bytes, data at 4), and `struct mmsghdr` (shim.c also asserts it against the GNU header).
@Suite(.timeLimit(.minutes(2))) struct CLinuxShimLayoutTests {
    @Test func epollEvent() {
        #if arch(x86_64)
        #expect(MemoryLayout<epoll_event>.size == 12)
        #expect(MemoryLayout<epoll_event>.offset(of: \.data) == 4)
        #else
        #expect(MemoryLayout<epoll_event>.size == 16)
        #expect(MemoryLayout<epoll_event>.offset(of: \.data) == 8)
        #endif
        #expect(MemoryLayout<epoll_event>.offset(of: \.events) == 0)
    }

    @Test func mmsghdr() {
        #expect(MemoryLayout<bledfu_mmsghdr>.offset(of: \.msg_hdr) == 0)
        #expect(MemoryLayout<bledfu_mmsghdr>.offset(of: \.msg_len) == MemoryLayout<msghdr>.size)
        #expect(MemoryLayout<bledfu_mmsghdr>.stride == 64)  // LP64: msghdr 56 + unsigned int, aligned to 8
    }

    /// SO_PEERCRED's `struct ucred`: pid@0, uid@4, gid@8 (12 bytes).
    @Test func ucred() {
        #expect(MemoryLayout<bledfu_ucred>.size == 12)
        #expect(MemoryLayout<bledfu_ucred>.offset(of: \.uid) == 4)
        #expect(MemoryLayout<bledfu_ucred>.offset(of: \.gid) == 8)
        #expect(BLEDFU_SO_PEERCRED == 17)
    }
}
