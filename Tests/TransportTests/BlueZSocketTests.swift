import BLECore
import BlueZTransport
import CBlueZShim
import LinuxIO
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// True when this kernel has AF_BLUETOOTH (then the no-kernel expectations are replaced by other checks).
private func kernelHasBluetooth() -> Bool {
    guard let fd = try? SocketDescriptor.open(domain: 31, type: SocketDescriptor.seqPacket, protocol: 0) else {
        return false
    }
    try? fd.close()
    return true
}

private let peer = PeerAddress(BluetoothAddress("C0:FF:EE:00:00:01")!, type: .random)

/// Against the real kernel: on a machine without Bluetooth both operations fail with one clear line.
@Suite(.timeLimit(.minutes(5))) struct BlueZNoKernelTests {
    @Test func connectWithoutBluetoothInKernel() async {
        for name in ["hci99", nil] as [String?] {
            if name == nil && kernelHasBluetooth() { continue }  // would really try to connect
            do {
                _ = try await BlueZAdapter(name: name).connect(to: peer, options: ConnectOptions(timeout: .seconds(1)))
                Issue.record("connect succeeded")
            } catch {
                if kernelHasBluetooth() {
                    #expect(error.code == .noAdapter, "hci99 does not exist")
                } else {
                    #expect(error.code == .noBluetoothInKernel)
                    #expect(error.reason == "this kernel has no Bluetooth support (socket: Address family not supported)")
                    #expect(error.errno == EAFNOSUPPORT)
                }
            }
        }
    }

    @Test func scanWithoutBluetoothInKernel() async {
        do {
            for try await advertisement in BlueZAdapter(name: "hci99").scan(filter: ScanFilter(), duration: .seconds(1)) {
                Issue.record("got \(advertisement)")
            }
            Issue.record("scan ended without an error")
        } catch let error as AdapterError {
            #expect(error.code == (kernelHasBluetooth() ? .noAdapter : .noBluetoothInKernel))
            if !kernelHasBluetooth() { #expect(error.description == BlueZErrors.noBluetoothMessage) }
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }
}

#if ENABLE_MOCKING
/// The L2CAP and HCI socket sequences at the syscall boundary, answered by LinuxIO's SyscallMock.
@Suite(.timeLimit(.minutes(5))) struct BlueZSyscallSequenceTests {
    static let fd = 9999

    @Test func l2capConnectSequence() async throws {
        let mock = SyscallMock(script: [
            .returns("socket", Self.fd),
            .returns("bind", 0),
            .returns("setsockopt", 0),  // BT_SECURITY
            .returns("setsockopt", 0),  // SO_SNDBUF
            .fails("connect", .nowInProgress),
            .bytes("getsockopt", [0, 0, 0, 0]),  // SO_ERROR: connected
            .bytes("getsockopt", [0x40, 0x00, 0, 0, 0, 0]),  // L2CAP_CONNINFO: handle 0x0040
            .returns("close", 0),
        ])
        let source = BluetoothAddress("00:1A:7D:DA:71:13")
        let options = ConnectOptions(timeout: .seconds(5), securityLevel: 2, sendBufferBytes: 4096)
        let linkInfo = try await mock.run { () async throws(AdapterError) -> LinkInfo in
            let connection = try await L2CAPConnector.connect(source: source, adapterName: "hci0", to: peer, options: options)
            try? connection.socket.close()
            return connection.linkInfo
        }
        #expect(mock.violations.isEmpty)
        #expect(mock.callNames == ["socket", "bind", "setsockopt", "setsockopt", "connect", "waitWritable", "getsockopt", "getsockopt", "close"])
        #expect(linkInfo.connectionHandle == 0x0040)
        #expect(linkInfo.peer == peer)
        let calls = mock.calls
        // socket(AF_BLUETOOTH, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_L2CAP)
        #expect(calls[0].arguments == [31, Int(SOCK_SEQPACKET.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0])
        // bind: family 31 | psm 0 | adapter address LE order | cid 4 | LE public
        #expect(calls[1].arguments == [Self.fd, 14])
        #expect(calls[1].input.map { Array($0.prefix(13)) } == [31, 0, 0, 0, 0x13, 0x71, 0xDA, 0x7D, 0x1A, 0x00, 4, 0, 1])
        // BT_SECURITY { level 2, key size 0 } at SOL_BLUETOOTH
        #expect(calls[2].arguments == [Self.fd, 274, 4])
        #expect(calls[2].input == [2, 0])
        // SO_SNDBUF 4096
        #expect(calls[3].arguments == [Self.fd, Int(SOL_SOCKET), Int(SO_SNDBUF)])
        #expect(calls[3].input == [0x00, 0x10, 0x00, 0x00])
        // connect: peer address LE order, cid 4, LE random
        #expect(calls[4].input.map { Array($0.prefix(13)) } == [31, 0, 0, 0, 0x01, 0x00, 0x00, 0xEE, 0xFF, 0xC0, 4, 0, 2])
        #expect(calls[6].arguments == [Self.fd, Int(SOL_SOCKET), Int(SO_ERROR)])
        #expect(calls[7].arguments == [Self.fd, 6, 2])  // SOL_L2CAP, L2CAP_CONNINFO
    }

    /// HCIGETCONNLIST's answer (`struct hci_conn_list_req`): dev_id u16, conn_num u16, then 16 bytes per link:
    /// handle u16, bdaddr (LSB first), type u8 (0x80 LE), out u8, state u16, link_mode u32.
    static func connectionList(_ links: [(BluetoothAddress, le: Bool)]) -> [UInt8] {
        var bytes: [UInt8] = [0, 0, UInt8(links.count), 0]
        for (index, link) in links.enumerated() {
            bytes += [UInt8(0x40 + index), 0x00] + link.0.bytes.reversed() + [link.le ? 0x80 : 0x01, 1, 1, 0, 0, 0, 0, 0]
        }
        return bytes
    }

    /// Runs a connect whose `connect(2)` fails at once (`immediate`) or whose SO_ERROR is `errno` after the wait; the
    /// adapter's links (HCIGETCONNLIST) are `links`. Returns the error and the calls made.
    func failedConnect(errno: Int32, immediate: Bool = false, links: [(BluetoothAddress, le: Bool)] = [])
        async -> (AdapterError?, [String], [String])
    {
        let start: [SyscallMock.Step] =
            immediate
            ? [.fails("connect", Errno(rawValue: errno))]
            : [.fails("connect", .nowInProgress), .bytes("getsockopt", withUnsafeBytes(of: errno) { Array($0) })]
        let mock = SyscallMock(
            script: [.returns("socket", Self.fd), .returns("bind", 0)] + start + [
                .returns("socket", 9998), .bytes("ioctl", Self.connectionList(links)), .returns("close", 0),  // links
                .returns("close", 0),
            ])
        let error = await mock.run { () async -> AdapterError? in
            do throws(AdapterError) {
                let options = ConnectOptions(securityLevel: nil, sendBufferBytes: nil)
                _ = try await L2CAPConnector.connect(source: nil, adapterName: "hci0", to: peer, options: options)
                return nil
            } catch {
                return error
            }
        }
        return (error, mock.callNames, mock.violations)
    }

    /// A failed connect closes the socket and maps errno, with what the adapter holds, to the real cause
    /// (many-links.md §2.4: bt_to_errno in net/bluetooth/lib.c).
    @Test(arguments: [
        (EBUSY, 0, AdapterError.Code.adapterBusy),  // 0x0C Command Disallowed
        (ETIMEDOUT, 0, .connectionTimeout),  // the kernel's create-phase timeout
        (EHOSTDOWN, 0, .adapterDown),
        (EACCES, 0, .permissionDenied),
        (ECONNREFUSED, 0, .deviceNotFound),  // never seen during the scan phase (SO_SNDTIMEO, 40 s)
        (ECONNREFUSED, 2, .noFreeLink),  // 0x0D Limited Resources while the adapter holds links
        (EMLINK, 0, .noFreeLink),  // 0x09 Connection Limit Exceeded
        (ENOMEM, 3, .noFreeLink),  // 0x07 Memory Capacity Exceeded
        (ENOSYS, 0, .connectionTimeout),  // 0x3E Connection Failed to be Established
        (EPROTO, 1, .adapterBusy),  // an LL error to a second Create Connection
        (EIO, 1, .adapterBusy),  // 0x03 Hardware Failure to a second Create Connection
    ])
    func connectFailureIsMapped(_ errno: Int32, _ links: Int, _ code: AdapterError.Code) async throws {
        let others = try (0..<links).map { try #require(BluetoothAddress(bytes: [0xC0, 0xFF, 0xEE, 0x00, 0x01, UInt8($0)])) }
        let (error, calls, violations) = await failedConnect(errno: errno, links: others.map { ($0, le: true) })
        #expect(error?.code == code, "\(error?.reason ?? "no error")")
        #expect(error?.errno == errno)
        #expect(calls == ["socket", "bind", "connect", "waitWritable", "getsockopt", "socket", "ioctl", "close", "close"])
        #expect(violations.isEmpty)
    }

    @Test func theMessagesNameTheControllerStatus() async throws {
        #expect(await failedConnect(errno: EMLINK).0?.reason.contains("HCI 0x09 Connection Limit Exceeded, reported as EMLINK") == true)
        #expect(await failedConnect(errno: ENOMEM).0?.reason.contains("HCI 0x07 Memory Capacity Exceeded, reported as ENOMEM") == true)
        #expect(await failedConnect(errno: ENOSYS).0?.reason.contains("HCI 0x3E Connection Failed to be Established") == true)
        #expect(await failedConnect(errno: EBUSY).0?.reason.contains("HCI 0x0C Command Disallowed") == true)
        let other = try #require(BluetoothAddress("C0:FF:EE:00:01:00"))
        let refused = await failedConnect(errno: ECONNREFUSED, links: [(other, le: true)]).0
        #expect(refused?.reason.contains("hci0 has 1 LE link and its controller refused another") == true)
    }

    /// EBUSY from `connect()` itself: another program owns CID 4 on an existing link to the peer, or, with no link,
    /// the adapter advertises while another creation is pending (l2cap_chan_connect → hci_connect_le).
    @Test func immediateEBUSYTellsItsTwoCausesApart() async throws {
        let address = try #require(BluetoothAddress("C0:FF:EE:00:00:01"))
        let (held, calls, violations) = await failedConnect(errno: EBUSY, immediate: true, links: [(address, le: true)])
        #expect(held?.code == .busy)
        #expect(held?.reason == "another program (usually bluetoothd) already holds the ATT channel of the link to \(peer) (EBUSY)")
        #expect(calls == ["socket", "bind", "connect", "socket", "ioctl", "close", "close"])
        #expect(violations.isEmpty)
        let (advertising, _, _) = await failedConnect(errno: EBUSY, immediate: true)
        #expect(advertising?.code == .adapterBusy)
        #expect(advertising?.reason.contains("hci0 is advertising") == true)
    }
}
#endif
