#if ENABLE_MOCKING
import BLECore
import BlueZTransport
import Foundation
import LinuxIO
import SystemPackage
import Testing

/// `bledfu adapters`' BlueZ half: HCIGETDEVLIST + HCIGETDEVINFO + HCIGETCONNLIST at the syscall boundary
/// (SyscallMock), the rfkill class from a directory laid out as /sys/class/rfkill.
@Suite(.timeLimit(.minutes(5))) struct AdapterStatusTests {
    static let fd = 9999

    /// `struct hci_dev_info` (92 bytes): dev_id, name "hciN" @2, bdaddr @10 (LSB first), flags u32 @16 (HCI_UP bit 0),
    /// type u8 @20 (bus in the low nibble: 1 USB), features[8] @21 (byte 4 bit 6: LE Supported (Controller)).
    static func devInfo(id: UInt8, up: Bool, le: Bool, bus: UInt8) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 92)
        bytes[0] = id
        bytes.replaceSubrange(2..<6, with: Array("hci\(id)".utf8))
        bytes.replaceSubrange(10..<16, with: [0x13, 0x71, 0xDA, 0x7D, 0x1A, id])
        bytes[16] = up ? 0x01 : 0x00
        bytes[20] = bus
        bytes[21 + 4] = le ? 0x40 : 0x00
        return bytes
    }

    /// `struct hci_dev_list_req`: dev_num u16, pad, then { dev_id u16, pad, dev_opt u32 } per adapter.
    static func devList(_ ids: [UInt8]) -> [UInt8] {
        [UInt8(ids.count), 0, 0, 0] + ids.flatMap { [$0, 0, 0, 0, 0, 0, 0, 0] }
    }

    /// `struct hci_conn_list_req`: dev_id u16, conn_num u16, 16 bytes per link: handle u16, bdaddr, type u8 (0x80 LE,
    /// 0x01 ACL), out, state u16, link_mode u32.
    static func connList(le: Int, acl: Int) -> [UInt8] {
        var bytes: [UInt8] = [0, 0, UInt8(le + acl), 0]
        for index in 0..<(le + acl) {
            bytes += [UInt8(0x40 + index), 0x00, 1, 2, 3, 4, 5, UInt8(index), index < le ? 0x80 : 0x01, 1, 1, 0, 0, 0, 0, 0]
        }
        return bytes
    }

    /// An rfkill class directory: one entry per (index, name, type, soft, hard).
    static func rfkillRoot(_ entries: [(String, String, String, Int, Int)]) throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-rfkill-\(UUID().uuidString)").path
        for (index, name, type, soft, hard) in entries {
            let dir = root + "/" + index
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for (file, value) in [("name", name), ("type", type), ("soft", "\(soft)"), ("hard", "\(hard)")] {
                try Data((value + "\n").utf8).write(to: URL(fileURLWithPath: dir + "/" + file))
            }
        }
        return root
    }

    @Test func twoAdaptersWithFeaturesRfkillAndLinks() throws {
        let root = try Self.rfkillRoot([
            ("rfkill0", "phy0", "wlan", 1, 0),  // another radio's switch, soft-blocked: not hci0's
            ("rfkill1", "hci0", "bluetooth", 0, 0),
            ("rfkill2", "hci1", "bluetooth", 1, 0),
        ])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let mock = SyscallMock(
            script: [
                .returns("socket", Self.fd), .bytes("ioctl", Self.devList([0, 1])),
                .bytes("ioctl", Self.devInfo(id: 0, up: true, le: true, bus: 1)),
                .bytes("ioctl", Self.devInfo(id: 1, up: false, le: false, bus: 0)), .returns("close", 0),
                .returns("socket", Self.fd), .bytes("ioctl", Self.connList(le: 2, acl: 1)), .returns("close", 0),
                .returns("socket", Self.fd), .fails("ioctl", Errno(rawValue: ENODEV)), .returns("close", 0),
            ], passthroughWhenExhausted: true)
        let statuses = try mock.run { () throws(AdapterError) in try BlueZAdapter.statuses(rfkillRoot: root) }
        #expect(mock.violations.isEmpty)
        #expect(mock.calls.prefix(11).map(\.name) == ["socket", "ioctl", "ioctl", "ioctl", "close", "socket", "ioctl", "close", "socket", "ioctl", "close"])
        #expect(mock.calls[6].arguments == [Self.fd, 0x8004_48D4])  // HCIGETCONNLIST
        #expect(statuses.count == 2)
        let first = try #require(statuses.first)
        #expect(first.info.name == "hci0")
        #expect(first.info.address == BluetoothAddress("00:1A:7D:DA:71:13"))
        #expect(first.info.isUp && first.info.supportsLE && first.info.busName == "USB")
        #expect(first.rfkill == RfkillState(index: "rfkill1", softBlocked: false, hardBlocked: false))
        #expect(first.openLinks == 2)  // the BR/EDR link is not counted
        let second = statuses[1]
        #expect(second.info.name == "hci1" && !second.info.isUp && !second.info.supportsLE)
        #expect(second.info.busName == "virtual")
        #expect(second.rfkill == RfkillState(index: "rfkill2", softBlocked: true, hardBlocked: false))
        #expect(second.openLinks == nil)
    }

    @Test func rfkillStates() throws {
        let root = try Self.rfkillRoot([("rfkill3", "hci0", "bluetooth", 0, 1), ("rfkill4", "hci2", "wlan", 0, 0)])
        defer { try? FileManager.default.removeItem(atPath: root) }
        let hard = try #require(RfkillState.of(adapter: "hci0", root: root))
        #expect(hard.hardBlocked && !hard.softBlocked)
        #expect(hard.description.hasPrefix("hard-blocked"))
        #expect(RfkillState.of(adapter: "hci2", root: root) == nil)  // not a Bluetooth switch
        #expect(RfkillState.of(adapter: "hci1", root: root) == nil)
        #expect(RfkillState.of(adapter: "hci0", root: root + "/missing") == nil)
        #expect(RfkillState(index: "rfkill0", softBlocked: true, hardBlocked: false).description.contains("rfkill unblock bluetooth"))
    }

    @Test func noBluetoothInTheKernelIsAnAdapterError() {
        let mock = SyscallMock(script: [.fails("socket", Errno(rawValue: EAFNOSUPPORT))])
        #expect(throws: AdapterError.self) { try mock.run { () throws(AdapterError) in try BlueZAdapter.statuses() } }
        #expect(mock.violations.isEmpty)
    }
}
#endif
