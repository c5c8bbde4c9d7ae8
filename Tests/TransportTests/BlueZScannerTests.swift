#if ENABLE_MOCKING
import BLECore
import BlueZTransport
import LinuxIO
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Adapter lookup and the HCI scan sequence at the syscall boundary (LinuxIO's SyscallMock).
@Suite(.timeLimit(.minutes(5))) struct BlueZScannerTests {
    static let fd = 9999
    static let adapter = BlueZAdapterInfo(id: 0, name: "hci0", address: BluetoothAddress("00:1A:7D:DA:71:13"), isUp: true)

    /// `struct hci_dev_info` (92 bytes): dev_id 0, name "hci0", bdaddr 00:1A:7D:DA:71:13 (LE order), flags.
    static func devInfo(up: Bool) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 92)
        bytes.replaceSubrange(2..<6, with: Array("hci0".utf8))
        bytes.replaceSubrange(10..<16, with: [0x13, 0x71, 0xDA, 0x7D, 0x1A, 0x00])
        bytes[16] = up ? 0x01 : 0x00  // HCI_UP is bit 0
        return bytes
    }

    @Test func lookupByName() throws {
        let mock = SyscallMock(script: [.returns("socket", Self.fd), .bytes("ioctl", Self.devInfo(up: true)), .returns("close", 0)])
        let info = try mock.run { () throws(AdapterError) in try BlueZAdapter(name: "hci0").resolve() }
        #expect(info == Self.adapter)
        #expect(mock.callNames == ["socket", "ioctl", "close"])
        #expect(mock.calls[0].arguments == [31, Int(SOCK_RAW.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 1])
        #expect(mock.calls[1].arguments == [Self.fd, 0x8004_48D3])  // HCIGETDEVINFO
        #expect(mock.violations.isEmpty)
    }

    @Test func adapterDownAndMissing() {
        let down = SyscallMock(script: [.returns("socket", Self.fd), .bytes("ioctl", Self.devInfo(up: false)), .returns("close", 0)])
        #expect(throws: AdapterError(.adapterDown, "")) { try down.run { () throws(AdapterError) in try BlueZAdapter(name: "hci0").resolve() } }
        let missing = SyscallMock(script: [.returns("socket", Self.fd), .fails("ioctl", Errno(rawValue: ENODEV)), .returns("close", 0)])
        #expect(throws: AdapterError(.noAdapter, "")) { try missing.run { () throws(AdapterError) in try BlueZAdapter(name: "hci1").resolve() } }
        #expect(throws: AdapterError(.noAdapter, "")) { try BlueZAdapter(name: "eth0").resolve() }
    }

    @Test func anyAdapterUsesTheDeviceList() throws {
        // struct hci_dev_list_req: dev_num 1 | pad | { dev_id 0 | pad | dev_opt 0 }
        let list: [UInt8] = [0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        let mock = SyscallMock(script: [
            .returns("socket", Self.fd), .bytes("ioctl", list), .bytes("ioctl", Self.devInfo(up: true)), .returns("close", 0),
        ])
        let info = try mock.run { () throws(AdapterError) in try BlueZAdapter(name: nil).resolve() }
        #expect(info == Self.adapter)
        #expect(mock.calls[1].arguments == [Self.fd, 0x8004_48D2])  // HCIGETDEVLIST
        #expect(mock.violations.isEmpty)
    }

    @Test func scanWithoutCapNetRaw() async {
        let mock = SyscallMock(script: [
            .returns("socket", Self.fd), .returns("bind", 0), .returns("setsockopt", 0),
            .fails("send", .notPermitted), .returns("close", 0),
        ])
        let error = await mock.run { () async -> AdapterError? in
            do throws(AdapterError) {
                try await HCIScanner(adapter: Self.adapter).run(filter: ScanFilter(), duration: .seconds(1)) { _ in }
                return nil
            } catch { return error }
        }
        #expect(error?.code == .permissionDenied)
        #expect(error?.reason == "scanning needs CAP_NET_RAW: run as root or grant it with: sudo setcap cap_net_raw,cap_net_admin+eip $(command -v bledfu)")
        #expect(mock.callNames == ["socket", "bind", "setsockopt", "send", "close"])
        // sockaddr_hci { 31, dev 0, channel raw }; HCI_FILTER at SOL_HCI: events 0x0E, 0x0F, 0x3E
        #expect(mock.calls[1].input == [31, 0, 0, 0, 0, 0])
        #expect(mock.calls[2].arguments == [Self.fd, 0, 2])
        #expect(mock.calls[2].input == [0x10, 0, 0, 0, 0x00, 0xC0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0])
    }

    /// Legacy Set Scan Parameters answered with Command Disallowed → extended scan; one extended report is
    /// delivered; the adapter goes away (ENETDOWN) and the scan is still disabled before the socket closes.
    @Test func fallsBackToExtendedScanAndDisablesAtTheEnd() async {
        let mock = SyscallMock(script: [
            .returns("socket", Self.fd), .returns("bind", 0), .returns("setsockopt", 0),
            .returns("send", 11), .bytes("recv", [0x04, 0x0E, 0x04, 0x01, 0x0B, 0x20, 0x0C]),
            .returns("send", 12), .bytes("recv", [0x04, 0x0E, 0x04, 0x01, 0x41, 0x20, 0x00]),
            .returns("send", 10), .bytes("recv", [0x04, 0x0E, 0x04, 0x01, 0x42, 0x20, 0x00]),
            .bytes("recv", BlueZHCICodecTests.extendedReport),
            .bytes("recv", BlueZHCICodecTests.extendedReport),  // duplicate: folded
            .fails("recv", .networkDown),
            .returns("send", 10), .bytes("recv", [0x04, 0x0E, 0x04, 0x01, 0x42, 0x20, 0x00]),
            .returns("close", 0),
        ])
        let box = ReportBox()
        let error = await mock.run { () async -> AdapterError? in
            do throws(AdapterError) {
                try await HCIScanner(adapter: Self.adapter).run(filter: ScanFilter(), duration: .seconds(30)) { box.items.append($0) }
                return nil
            } catch { return error }
        }
        #expect(mock.violations.isEmpty)
        #expect(error?.code == .adapterDown)
        #expect(box.items.map(\.peer) == [PeerAddress(BluetoothAddress("C0:FF:EE:00:00:01")!, type: .random)])
        #expect(box.items.first?.rssi == -80)
        let sent = mock.calls.filter { $0.name == "send" }.compactMap(\.input)
        #expect(sent.map { Array($0.prefix(3)) } == [[0x01, 0x0B, 0x20], [0x01, 0x41, 0x20], [0x01, 0x42, 0x20], [0x01, 0x42, 0x20]])
        #expect(sent.last == HCICommand.leSetExtendedScanEnable(false).packet)
        #expect(mock.callNames.last == "close")
    }
}

extension BlueZScannerTests {
    /// A controller that does not answer Set Scan Parameters while advertising reports keep the socket readable
    /// (another program's scan): the command ends at its deadline. It used to read on as long as events came.
    @Test(.timeLimit(.minutes(1))) func aCommandUnansweredWhileReportsFlowEndsAtItsDeadline() async {
        var script: [SyscallMock.Step] = [
            .returns("socket", Self.fd), .returns("bind", 0), .returns("setsockopt", 0), .returns("send", 11),
        ]
        script += Array(repeating: .bytes("recv", BlueZHCICodecTests.extendedReport), count: 200_000)
        let mock = SyscallMock(script: script + [.returns("close", 0)])
        let error = await mock.run { () async -> AdapterError? in
            do throws(AdapterError) {
                try await HCIScanner(adapter: Self.adapter, commandTimeout: .milliseconds(50))
                    .run(filter: ScanFilter(), duration: .seconds(30)) { _ in }
                return nil
            } catch { return error }
        }
        #expect(error?.reason == "hci0 did not answer HCI command 0x200b in 0.05 seconds", "\(String(describing: error))")
        // It stopped reading at the deadline, long before the reports ran out.
        #expect(mock.remainingSteps.count > 1000)
    }
}

/// Collects reports from the scanner's synchronous callback.
private final class ReportBox: @unchecked Sendable {
    var items: [Advertisement] = []
}
#endif
