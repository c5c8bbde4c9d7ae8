import BLECore
import BlueZTransport
import LinuxIO
import Testing

/// Raising a BlueZ link's security at the syscall boundary (LinuxIO's SyscallMock): `BT_SECURITY` is read, set,
/// the socket waited on until the kernel has encrypted the link, and read again.
@Suite(.timeLimit(.minutes(5))) struct BlueZLinkSecurityTests {
    static let fd: CInt = 7002

    @Test func raiseSetsBTSecurityAndReadsTheLevelReached() async throws {
        let mock = SyscallMock(script: [
            .returns("fcntl", 2), .returns("fcntl", 0), .returns("fcntl", 0),  // SocketBearer: O_NONBLOCK, FD_CLOEXEC
            .bytes("getsockopt", [0x01, 0x00]),  // struct bt_security: level 1 (low), key size 0
            .returns("setsockopt", 0),
            .bytes("getsockopt", [0x02, 0x10]),  // level 2 (medium), 16-byte key
            .bytes("getsockopt", [0x02, 0x10]),
            .returns("shutdown", 0), .returns("close", 0),
        ])
        let (reached, now) = try await mock.run { () async throws -> (LinkSecurityLevel, LinkSecurityLevel) in
            let link = BlueZSecureLink(SocketBearer(descriptor: SocketDescriptor(rawValue: Self.fd)))
            defer { link.base.closeNow() }
            let reached = try await link.raiseSecurity(to: .medium)
            return (reached, await link.securityLevel())
        }
        #expect(reached == .medium)
        #expect(now == .medium)
        #expect(mock.violations.isEmpty)
        #expect(mock.callNames.contains("waitWritable"))
        // setsockopt(fd, SOL_BLUETOOTH 274, BT_SECURITY 4, { level 2, key size 0 }).
        let set = mock.calls.first { $0.name == "setsockopt" }
        #expect(set?.arguments == [Int(Self.fd), 274, 4])
        #expect(set?.input == [0x02, 0x00])
    }

    @Test func aRefusedRaiseReportsTheLevelInForce() async throws {
        let mock = SyscallMock(script: [
            .returns("fcntl", 2), .returns("fcntl", 0), .returns("fcntl", 0),
            .bytes("getsockopt", [0x01, 0x00]), .returns("setsockopt", 0), .bytes("getsockopt", [0x01, 0x00]),
            .returns("shutdown", 0), .returns("close", 0),
        ])
        let reached = try await mock.run { () async throws -> LinkSecurityLevel in
            let link = BlueZSecureLink(SocketBearer(descriptor: SocketDescriptor(rawValue: Self.fd)))
            defer { link.base.closeNow() }
            return try await link.raiseSecurity(to: .medium)
        }
        #expect(reached == .low)
        #expect(mock.violations.isEmpty)
    }
}
