#if ENABLE_MOCKING
import BLECore
import BlueZTransport
import LinuxIO
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The peripheral role and link tuning at the syscall boundary (LinuxIO's SyscallMock).
@Suite(.timeLimit(.minutes(5))) struct BlueZPeripheralSyscallTests {
    static let listener = 9001
    static let hci = 9002
    static let adapter = BlueZAdapterInfo(id: 1, name: "hci1", address: BluetoothAddress("00:AA:01:01:00:01"), isUp: true)
    static let bracelet = Advertisement(
        peer: PeerAddress(BluetoothAddress("C6:05:04:03:02:01")!, type: .random), rssi: nil,
        data: AdvertisingData.build(flags: 0x06, name: "Bracelet", services: [BluetoothUUID(0xFE59)]))

    /// Command Complete for `opcode` with `status`: 04 0E 04 | ncmd 01 | opcode | status.
    static func complete(_ opcode: UInt16, _ status: UInt8 = 0, _ extra: [UInt8] = []) -> [UInt8] {
        [0x04, 0x0E, UInt8(4 + extra.count), 0x01, UInt8(opcode & 0xFF), UInt8(opcode >> 8), status] + extra
    }

    /// Command Status: 04 0F 04 | status | ncmd 01 | opcode.
    static func status(_ opcode: UInt16, _ status: UInt8 = 0) -> [UInt8] {
        [0x04, 0x0F, 0x04, status, 0x01, UInt8(opcode & 0xFF), UInt8(opcode >> 8)]
    }

    static let openSteps: [SyscallMock.Step] = [
        .returns("socket", listener), .returns("bind", 0), .returns("listen", 0),
        .returns("socket", hci), .returns("bind", 0), .returns("setsockopt", 0),
    ]

    @Test func advertisesAtTheRandomAddress() async throws {
        let mock = SyscallMock(script: Self.openSteps + [
            .returns("send", 5), .bytes("recv", Self.complete(0x200A, 0x0C)),  // disable: already off
            .returns("send", 10), .bytes("recv", Self.complete(0x2005)),
            .returns("send", 19), .bytes("recv", Self.complete(0x2006)),
            .returns("send", 36), .bytes("recv", Self.complete(0x2008)),
            .returns("send", 36), .bytes("recv", Self.complete(0x2009)),
            .returns("send", 5), .bytes("recv", Self.complete(0x200A)),
        ])
        let current = try await mock.run { () async throws(AdapterError) -> Advertisement? in
            let peripheral = try BlueZPeripheral(adapter: Self.adapter)
            try await peripheral.advertise(Self.bracelet)
            return await peripheral.currentAdvertisement
        }
        #expect(mock.violations.isEmpty)
        #expect(current == Self.bracelet)
        let calls = mock.calls
        // socket(AF_BLUETOOTH, SEQPACKET|NONBLOCK|CLOEXEC, L2CAP); bind { 31 | psm 0 | 00:AA:01:01:00:01 | cid 4 | public }
        #expect(calls[0].arguments == [31, Int(SOCK_SEQPACKET.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0])
        #expect(calls[1].input.map { Array($0.prefix(13)) } == [31, 0, 0, 0, 0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 4, 0, 1])
        #expect(calls[2].arguments == [Self.listener, 1])
        // the HCI channel: raw socket bound to hci1; filter adds Disconnection Complete (bit 5)
        #expect(calls[4].input == [31, 0, 1, 0, 0, 0])
        #expect(calls[5].input == [0x10, 0, 0, 0, 0x20, 0xC0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0])
        let sent = calls.filter { $0.name == "send" }.compactMap(\.input)
        #expect(sent.count == 6)
        #expect(sent[0] == [0x01, 0x0A, 0x20, 0x01, 0x00])
        #expect(sent[1] == [0x01, 0x05, 0x20, 0x06, 0x01, 0x02, 0x03, 0x04, 0x05, 0xC6])
        #expect(sent[2][8] == 0x00 && sent[2][9] == 0x01)  // ADV_IND, own address type random
        #expect(Array(sent[3][4...21]) == [17] + Self.bracelet.data)
        #expect(sent[4][4] == 0)  // empty scan response
        #expect(sent[5] == [0x01, 0x0A, 0x20, 0x01, 0x01])
    }

    @Test func refusedCommandAndForeignPublicAddress() async {
        let refused = SyscallMock(script: Self.openSteps + [
            .returns("send", 5), .bytes("recv", Self.complete(0x200A)),
            .returns("send", 10), .bytes("recv", Self.complete(0x2005, 0x0C)),
        ])
        let error = await refused.run { () async -> AdapterError? in
            do throws(AdapterError) {
                try await BlueZPeripheral(adapter: Self.adapter).advertise(Self.bracelet)
                return nil
            } catch { return error }
        }
        #expect(error?.reason == "hci1 refused to set the random address: command disallowed (0x0C)")
        let foreign = SyscallMock(script: Self.openSteps + [.returns("send", 5), .bytes("recv", Self.complete(0x200A))])
        var publicAd = Self.bracelet
        publicAd.peer.type = .public
        let badAddress = await foreign.run { () async -> AdapterError? in
            do throws(AdapterError) {
                try await BlueZPeripheral(adapter: Self.adapter).advertise(publicAd)
                return nil
            } catch { return error }
        }
        #expect(badAddress?.code == .badAddress)
        #expect(foreign.violations.isEmpty && refused.violations.isEmpty)
    }

    @Test func acceptGivesABearerWithTheHandle() async throws {
        let mock = SyscallMock(script: Self.openSteps + [
            .fails("accept", .wouldBlock), .returns("accept", 7001),
            .bytes("getsockopt", [0x41, 0x00, 0, 0, 0, 0]),  // L2CAP_CONNINFO: handle 0x0041
            .returns("fcntl", 2), .returns("fcntl", 0), .returns("fcntl", 0),  // SocketBearer: O_NONBLOCK, FD_CLOEXEC
            .returns("shutdown", 0), .returns("close", 0),
        ])
        let handle = try await mock.run { () async throws -> UInt16? in
            let peripheral = try BlueZPeripheral(adapter: Self.adapter)
            let bearer = try await peripheral.accept()
            defer { bearer.closeNow() }
            return bearer.linkInfo.connectionHandle
        }
        #expect(handle == 0x0041)
        #expect(mock.violations.isEmpty)
        #expect(mock.callNames.suffix(9) == ["accept", "waitReadable", "accept", "getsockopt", "fcntl", "fcntl", "fcntl", "shutdown", "close"])
        #expect(mock.calls.first { $0.name == "getsockopt" }?.arguments == [7001, 6, 2])  // SOL_L2CAP, L2CAP_CONNINFO
    }

    @Test func disconnectWaitsForDisconnectionComplete() async {
        let mock = SyscallMock(script: Self.openSteps + [
            .returns("send", 7), .bytes("recv", Self.status(0x0406)),
            .bytes("recv", [0x04, 0x3E, 0x06, 0x0C, 0x00, 0x41, 0x00, 0x01, 0x01]),  // another link's event: kept
            .bytes("recv", [0x04, 0x05, 0x04, 0x00, 0x41, 0x00, 0x16]),
        ])
        let confirmed = await mock.run { () async -> Bool in
            guard let peripheral = try? BlueZPeripheral(adapter: Self.adapter) else { return false }
            return await peripheral.disconnect(handle: 0x41)
        }
        #expect(confirmed)
        #expect(mock.violations.isEmpty)
        #expect(mock.calls.first { $0.name == "send" }?.input == [0x01, 0x06, 0x04, 0x03, 0x41, 0x00, 0x13])
    }

    /// Closing twice closes the listener once (a descriptor number may be reused); accept then ends with `.closed`.
    @Test func closingIsIdempotent() async throws {
        let mock = SyscallMock(script: Self.openSteps + [
            .returns("shutdown", 0), .returns("close", 0),  // the listener
            .returns("send", 5), .returns("close", 0),  // advertising off (not awaited), the HCI socket
        ])
        let error = try await mock.run { () async throws -> BearerError? in
            let peripheral = try BlueZPeripheral(adapter: Self.adapter)
            peripheral.closeListener()
            peripheral.closeListener()
            await peripheral.close()
            do throws(BearerError) {
                _ = try await peripheral.accept()
                return nil
            } catch {
                return error
            }
        }
        #expect(mock.violations.isEmpty)
        #expect(error?.code == .closed)
        #expect(mock.callNames.suffix(4) == ["shutdown", "close", "send", "close"])
        #expect(mock.calls.filter { $0.name == "close" }.map(\.arguments) == [[Self.listener], [Self.hci]])
    }

    // MARK: Link tuning

    static let channelSteps: [SyscallMock.Step] = [.returns("socket", hci), .returns("bind", 0), .returns("setsockopt", 0)]
    static let central = BlueZAdapterInfo(id: 0, name: "hci0", address: BluetoothAddress("00:AA:01:00:00:00"), isUp: true)

    @Test func tunesIntervalPHYAndDataLength() async {
        let mock = SyscallMock(script: Self.channelSteps + [
            .returns("send", 18), .bytes("recv", Self.status(0x2013)),
            .bytes("recv", BlueZPeripheralCodecTests.connectionUpdate),
            .returns("send", 11), .bytes("recv", Self.status(0x2032)),
            .bytes("recv", BlueZPeripheralCodecTests.phyUpdate),
            .returns("send", 10), .bytes("recv", Self.complete(0x2022, 0x00, [0x40, 0x00])),
            .bytes("recv", BlueZPeripheralCodecTests.dataLength),
            .returns("close", 0),
        ])
        let report = await mock.run { () async -> LinkTuningReport in
            await LinkTuner.tune(adapter: Self.central, handle: 0x40, socket: SocketDescriptor(rawValue: 7001))
        }
        #expect(mock.violations.isEmpty)
        #expect(report.privileged)
        #expect(report.description == "link: interval 7.5 ms, latency 0, timeout 4000 ms; PHY 2M/2M (tx/rx); data length 251/251 bytes (tx/rx)")
        let sent = mock.calls.filter { $0.name == "send" }.compactMap(\.input)
        #expect(sent.map { Array($0.prefix(3)) } == [[0x01, 0x13, 0x20], [0x01, 0x32, 0x20], [0x01, 0x22, 0x20]])
    }

    /// A controller without the procedures (like btvirt for Set Data Length): each refusal is a note; the PHY is read.
    @Test func refusedProceduresAreNotes() async {
        let mock = SyscallMock(script: Self.channelSteps + [
            .returns("send", 18), .bytes("recv", Self.status(0x2013, 0x01)),
            .returns("send", 11), .bytes("recv", Self.status(0x2032, 0x11)),
            .returns("send", 6), .bytes("recv", Self.complete(0x2030, 0x00, [0x40, 0x00, 0x01, 0x01])),
            .returns("send", 10), .bytes("recv", Self.complete(0x2022, 0x01)),
            .returns("close", 0),
        ])
        let report = await mock.run { () async -> LinkTuningReport in
            await LinkTuner.tune(adapter: Self.central, handle: 0x40, socket: SocketDescriptor(rawValue: 7001))
        }
        #expect(mock.violations.isEmpty)
        #expect(report.privileged && report.transmitPHY == 1 && report.interval == nil)
        #expect(
            report.notes == [
                "connection interval: unknown HCI command (0x01)", "2M PHY: not supported here", "data length: not supported here",
            ])
    }

    /// Without CAP_NET_RAW the first LE command fails with EPERM: nothing else is sent, the PHY comes from BT_PHY.
    @Test func withoutPrivilegeReadsThePHYFromTheSocket() async {
        let mask: UInt32 = 0x0200 | 0x0400  // LE 1M TX and RX
        let mock = SyscallMock(script: Self.channelSteps + [
            .fails("send", .notPermitted),
            .bytes("getsockopt", withUnsafeBytes(of: mask.littleEndian) { Array($0) }),
            .returns("close", 0),
        ])
        let report = await mock.run { () async -> LinkTuningReport in
            await LinkTuner.tune(adapter: Self.central, handle: 0x40, socket: SocketDescriptor(rawValue: 7001))
        }
        #expect(mock.violations.isEmpty)
        #expect(!report.privileged)
        #expect(report.transmitPHY == 1 && report.receivePHY == 1)
        #expect(mock.calls.first { $0.name == "getsockopt" }?.arguments == [7001, 274, 14])  // SOL_BLUETOOTH, BT_PHY
        #expect(LinkTuningReport.unprivilegedMessage.hasPrefix("link tuning needs CAP_NET_RAW"))
    }
}
#endif
