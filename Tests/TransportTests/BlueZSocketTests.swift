import BLECore
import BlueZTransport
import CBlueZShim
import PlatformIO
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
/// The L2CAP and HCI socket sequences at the syscall boundary, answered by PlatformIO's SyscallMock.
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

    /// A failed connect (SO_ERROR) closes the socket and maps errno to one adapter error.
    @Test(arguments: [
        (EBUSY, AdapterError.Code.busy), (ETIMEDOUT, .connectionTimeout), (EHOSTDOWN, .adapterDown),
        (EACCES, .permissionDenied), (ECONNREFUSED, .connectionRefused),
    ])
    func connectFailureIsMapped(_ errno: Int32, _ code: AdapterError.Code) async {
        let mock = SyscallMock(script: [
            .returns("socket", Self.fd), .returns("bind", 0), .fails("connect", .nowInProgress),
            .bytes("getsockopt", withUnsafeBytes(of: errno) { Array($0) }), .returns("close", 0),
        ])
        let result = await mock.run { () async -> Result<LinkInfo, AdapterError> in
            do throws(AdapterError) {
                let options = ConnectOptions(securityLevel: nil, sendBufferBytes: nil)
                return .success(try await L2CAPConnector.connect(source: nil, adapterName: "hci0", to: peer, options: options).linkInfo)
            } catch {
                return .failure(error)
            }
        }
        guard case .failure(let error) = result else {
            Issue.record("connect succeeded")
            return
        }
        #expect(error.code == code)
        #expect(error.errno == errno)
        #expect(mock.callNames.last == "close")
        #expect(mock.violations.isEmpty)
        // bind to BDADDR_ANY
        #expect(mock.calls[1].input.map { Array($0[4..<10]) } == [0, 0, 0, 0, 0, 0])
    }

    @Test func immediateEBUSYFromConnect() async {
        let mock = SyscallMock(script: [
            .returns("socket", Self.fd), .returns("bind", 0), .fails("connect", .resourceBusy), .returns("close", 0),
        ])
        let result = await mock.run { () async -> AdapterError? in
            do throws(AdapterError) {
                _ = try await L2CAPConnector.connect(source: nil, adapterName: "hci0", to: peer, options: ConnectOptions(sendBufferBytes: nil))
                return nil
            } catch { return error }
        }
        #expect(result?.code == .busy)
        #expect(result?.reason == "another program (usually bluetoothd) already holds the ATT channel of this link")
        #expect(mock.callNames == ["socket", "bind", "connect", "close"])
    }
}
#endif
