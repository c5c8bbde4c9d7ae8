import BLECore
import CBlueZShim
import LinuxIO
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A BlueZ L2CAP ATT socket with its link security: the level is the socket's `BT_SECURITY` option, and raising it
/// is setting that option, which makes the kernel encrypt the link (with a stored key, or by Just Works pairing in
/// its SMP; no bluetoothd agent is involved). While the kernel works on it the socket is not writable
/// (`FLAG_PENDING_SECURITY`, `sk_state` BT_CONFIG); once it is writable again the option reads the level reached.
public final class BlueZSecureLink: ATTBearer {
    /// SMP's own timeout (Core v5.4 Vol 3 Part H §3.4): a pairing that has not finished by then has failed.
    public static let securityTimeout: Duration = .seconds(30)

    public let base: SocketBearer

    public init(_ base: SocketBearer) { self.base = base }

    public var linkInfo: LinkInfo { base.linkInfo }
    public func send(_ pdu: [UInt8]) async throws(BearerError) { try await base.send(pdu) }
    public func send(burst pdus: [[UInt8]]) async throws(BearerError) { try await base.send(burst: pdus) }
    public func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError) {
        try await base.send(burst: payloads, prefix: prefix)
    }
    public func receive() async throws(BearerError) -> [UInt8] { try await base.receive() }
    public func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        try await base.receive(upTo: maximumCount)
    }
    public func close() async { await base.close() }

    /// getsockopt(SOL_BLUETOOTH, BT_SECURITY); `.low` when it cannot be read.
    public func securityLevel() async -> LinkSecurityLevel {
        guard let socket = base.socket, let level = try? Self.read(socket) else { return .low }
        return level
    }

    public func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        guard let socket = base.socket else { throw BearerError(.closed, "bearer closed") }
        do throws(Errno) {
            if try Self.read(socket) >= level { return try Self.read(socket) }
            var security = bt_security(level: level.rawValue, key_size: 0)
            _ = try valueOrErrno {
                system_setsockopt(
                    socket.rawValue, BLEDFU_SOL_BLUETOOTH, BLEDFU_BT_SECURITY, &security,
                    socklen_t(MemoryLayout<bt_security>.size))
            }.get()
            try await socket.waitWritable(timeout: Self.securityTimeout)
            return try Self.read(socket)
        } catch {
            throw BearerError(.system, "BT_SECURITY \(level): \(error)", errno: error.rawValue)
        }
    }

    static func read(_ socket: SocketDescriptor) throws(Errno) -> LinkSecurityLevel {
        var security = bt_security(level: 0, key_size: 0)
        var length = socklen_t(MemoryLayout<bt_security>.size)
        _ = try valueOrErrno {
            system_getsockopt(socket.rawValue, BLEDFU_SOL_BLUETOOTH, BLEDFU_BT_SECURITY, &security, &length)
        }.get()
        return LinkSecurityLevel(rawValue: max(security.level, 1))
    }
}
