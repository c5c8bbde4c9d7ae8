#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinuxShim
import SystemPackage

/// A socket file descriptor in non-blocking mode, with typed operations. A value type: closing is explicit.
public struct SocketDescriptor: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: CInt

    public init(rawValue: CInt) { self.rawValue = rawValue }

    public var description: String { "fd \(rawValue)" }

    public static let seqPacket = CInt(SOCK_SEQPACKET.rawValue)
    private static let nonBlockingCloseOnExec = CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue)

    /// socket(2) with SOCK_NONBLOCK | SOCK_CLOEXEC added to `type`.
    public static func open(domain: CInt, type: CInt, protocol proto: CInt = 0) throws(Errno) -> SocketDescriptor {
        let fd = try valueOrErrno { system_socket(domain, type | nonBlockingCloseOnExec, proto) }.get()
        return SocketDescriptor(rawValue: fd)
    }

    /// A new non-blocking AF_UNIX SOCK_SEQPACKET socket.
    public static func unixSeqPacket() throws(Errno) -> SocketDescriptor {
        try open(domain: AF_UNIX, type: seqPacket)
    }

    /// A connected pair of non-blocking AF_UNIX SOCK_SEQPACKET sockets.
    public static func seqPacketPair() throws(Errno) -> (SocketDescriptor, SocketDescriptor) {
        var fds: [CInt] = [-1, -1]
        _ = try valueOrErrno { system_socketpair(AF_UNIX, seqPacket | nonBlockingCloseOnExec, 0, &fds) }.get()
        return (SocketDescriptor(rawValue: fds[0]), SocketDescriptor(rawValue: fds[1]))
    }

    // MARK: Data

    /// Sends one message (MSG_NOSIGNAL: a closed peer gives EPIPE, not SIGPIPE).
    public func send(_ bytes: [UInt8]) throws(Errno) -> IOResult<Int> {
        try bytes.withUnsafeBytes { buffer in
            ioResultOrErrno { system_send(rawValue, buffer.baseAddress, buffer.count, CInt(MSG_NOSIGNAL)) }
        }.get()
    }

    /// Receives one message into `buffer` (cut to its size); returns its length (0 is end of stream).
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> IOResult<Int> {
        try ioResultOrErrno { system_recv(rawValue, buffer.baseAddress, buffer.count, 0) }.get()
    }

    /// Receives one message of at most `maximumCount` bytes (an empty array is end of stream).
    public func receive(maximumCount: Int) throws(Errno) -> IOResult<[UInt8]> {
        var buffer = [UInt8](repeating: 0, count: maximumCount)
        let result = buffer.withUnsafeMutableBytes { raw in
            ioResultOrErrno { system_recv(rawValue, raw.baseAddress, raw.count, 0) }
        }
        switch try result.get() {
        case .processed(let count):
            buffer.removeSubrange(min(count, buffer.count)...)
            return .processed(buffer)
        case .wouldBlock: return .wouldBlock
        }
    }

    // MARK: Options

    public func setOption(level: CInt, name: CInt, value: CInt) throws(Errno) {
        var value = value
        _ = try valueOrErrno {
            system_setsockopt(rawValue, level, name, &value, socklen_t(MemoryLayout<CInt>.size))
        }.get()
    }

    public func getOption(level: CInt, name: CInt) throws(Errno) -> CInt {
        var value: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        _ = try valueOrErrno { system_getsockopt(rawValue, level, name, &value, &length) }.get()
        return value
    }

    /// The process at the other end of a connected Unix socket (SO_PEERCRED, socket(7)): the process that called
    /// `connect`, as the kernel recorded it then.
    public func peerProcessID() throws(Errno) -> Int32 {
        var credentials = bledfu_ucred()
        var length = socklen_t(MemoryLayout<bledfu_ucred>.size)
        _ = try valueOrErrno { system_getsockopt(rawValue, CInt(SOL_SOCKET), CInt(BLEDFU_SO_PEERCRED), &credentials, &length) }.get()
        return credentials.pid
    }

    /// SO_ERROR: the pending error of a non-blocking connect, nil when it succeeded.
    public func pendingError() throws(Errno) -> Errno? {
        let value = try getOption(level: SOL_SOCKET, name: SO_ERROR)
        return value == 0 ? nil : Errno(rawValue: value)
    }

    /// SO_SNDBUF (the kernel doubles the value it is given).
    public func setSendBufferSize(_ bytes: Int) throws(Errno) {
        try setOption(level: SOL_SOCKET, name: SO_SNDBUF, value: CInt(clamping: bytes))
    }

    // MARK: Connection setup

    /// bind(2) with a raw socket address.
    public func bind(address: UnsafeRawBufferPointer) throws(Errno) {
        guard let base = address.baseAddress else { throw .invalidArgument }
        _ = try valueOrErrno {
            system_bind(rawValue, base.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
        }.get()
    }

    /// connect(2) with a raw socket address. EINPROGRESS and EAGAIN are `.wouldBlock`.
    public func connect(address: UnsafeRawBufferPointer) throws(Errno) -> IOResult<Void> {
        guard let base = address.baseAddress else { throw .invalidArgument }
        let result = valueOrErrno {
            system_connect(rawValue, base.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
        }
        switch result {
        case .success: return .processed(())
        case .failure(let error) where error == .nowInProgress || error == .wouldBlock: return .wouldBlock
        case .failure(let error): throw error
        }
    }

    public func listen(backlog: CInt) throws(Errno) {
        _ = try valueOrErrno { system_listen(rawValue, backlog) }.get()
    }

    /// accept(2); the new descriptor is made non-blocking and close-on-exec.
    public func accept() throws(Errno) -> IOResult<SocketDescriptor> {
        switch try ioResultOrErrno({ system_accept(rawValue, nil, nil) }).get() {
        case .processed(let fd):
            let accepted = SocketDescriptor(rawValue: fd)
            do throws(Errno) {
                try SocketDescriptor.setNonBlockingCloseOnExec(fd)
            } catch {
                try? accepted.close()  // already failing with `error`; the close result adds nothing
                throw error
            }
            return .processed(accepted)
        case .wouldBlock: return .wouldBlock
        }
    }

    /// O_NONBLOCK and FD_CLOEXEC on any descriptor.
    public static func setNonBlockingCloseOnExec(_ fd: CInt) throws(Errno) {
        let flags = try valueOrErrno { system_fcntl(fd, F_GETFL, 0) }.get()
        _ = try valueOrErrno { system_fcntl(fd, F_SETFL, flags | O_NONBLOCK) }.get()
        _ = try valueOrErrno { system_fcntl(fd, F_SETFD, FD_CLOEXEC) }.get()
    }

    // MARK: Readiness and teardown

    /// Suspends until readable (or error/hang-up). Throws ETIMEDOUT after `timeout`, ECANCELED on cancellation or
    /// when the descriptor is being closed.
    public func waitReadable(timeout: Duration? = nil) async throws(Errno) {
        #if ENABLE_MOCKING
        if let mock = SyscallMock.current {
            mock.recordWait("waitReadable", fd: rawValue)
            return
        }
        #endif
        try await Reactor.shared.wait(for: rawValue, readable: true, timeout: timeout)
    }

    /// Suspends until writable (or error/hang-up); see ``waitReadable(timeout:)``.
    public func waitWritable(timeout: Duration? = nil) async throws(Errno) {
        #if ENABLE_MOCKING
        if let mock = SyscallMock.current {
            mock.recordWait("waitWritable", fd: rawValue)
            return
        }
        #endif
        try await Reactor.shared.wait(for: rawValue, readable: false, timeout: timeout)
    }

    /// shutdown(SHUT_RDWR): wakes every waiter (the descriptor becomes readable and writable).
    public func shutdown() throws(Errno) {
        _ = try valueOrErrno { system_shutdown(rawValue, CInt(SHUT_RDWR)) }.get()
    }

    /// Cancels the reactor's waits on this descriptor, then closes it. EINTR is not retried (Linux has already
    /// released the descriptor, and retrying could close a reused number).
    public func close() throws(Errno) {
        Reactor.shared.cancelWaits(on: rawValue)
        _ = try valueOrErrno(retryOnInterrupt: false) { system_close(rawValue) }.get()
    }
}

// MARK: - Unix domain addresses

extension SocketDescriptor {
    /// The longest path a `sockaddr_un` holds (without the terminating NUL).
    public static let maximumUnixPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Calls `body` with a `sockaddr_un` for `path`; ENAMETOOLONG when it does not fit.
    static func withUnixAddress<R>(
        _ path: String, _ body: (UnsafeRawBufferPointer) throws(Errno) -> R
    ) throws(Errno) -> R {
        let utf8 = Array(path.utf8)
        guard utf8.count <= maximumUnixPathLength else { throw .fileNameTooLong }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in utf8.enumerated() { raw[index] = byte }
        }
        let length = MemoryLayout<sa_family_t>.size + utf8.count + 1
        return try withUnsafeBytes(of: &address) { (raw) throws(Errno) -> R in
            try body(UnsafeRawBufferPointer(rebasing: raw[0..<length]))
        }
    }

    public func bind(unixPath path: String) throws(Errno) {
        try SocketDescriptor.withUnixAddress(path) { (address) throws(Errno) in try bind(address: address) }
    }

    public func connect(unixPath path: String) throws(Errno) -> IOResult<Void> {
        try SocketDescriptor.withUnixAddress(path) { (address) throws(Errno) in try connect(address: address) }
    }
}
