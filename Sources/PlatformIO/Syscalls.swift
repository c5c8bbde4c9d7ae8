// The one file in bledfu that calls libc. Every wrapper is a thin `@inline(never)` call with a mocking hook
// (the swift-system "Mocking" pattern): when a `SyscallMock` is installed for the current task, the call is
// recorded and answered from the mock's script instead of reaching the kernel.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// MARK: - Policy helpers

/// The errno of the last failed call on this thread.
@inline(__always)
func currentErrno() -> Errno { Errno(rawValue: errno) }

/// Runs a libc-style call returning -1 on failure. EINTR is retried when `retryOnInterrupt` is true.
public func valueOrErrno<I: FixedWidthInteger>(
    retryOnInterrupt: Bool = true, _ call: () -> I
) -> Result<I, Errno> {
    while true {
        let value = call()
        if value != -1 { return .success(value) }
        let error = currentErrno()
        if retryOnInterrupt && error == .interrupted { continue }
        return .failure(error)
    }
}

/// The outcome of a non-blocking operation: EAGAIN/EWOULDBLOCK is a value, not an error.
public enum IOResult<T> {
    case processed(T)
    case wouldBlock
}

extension IOResult: Sendable where T: Sendable {}

/// Like `valueOrErrno`, with EAGAIN/EWOULDBLOCK mapped to `.wouldBlock`.
public func ioResultOrErrno<I: FixedWidthInteger>(_ call: () -> I) -> Result<IOResult<I>, Errno> {
    switch valueOrErrno(retryOnInterrupt: true, call) {
    case .success(let value): return .success(.processed(value))
    case .failure(let error) where error == .wouldBlock || error == .resourceTemporarilyUnavailable:
        return .success(.wouldBlock)
    case .failure(let error): return .failure(error)
    }
}

// MARK: - Mocking hook

#if ENABLE_MOCKING
/// Answers a call from the installed mock, or nil when no mock is installed (or it passes this call through).
@inline(__always)
func mocked(
    _ name: String, _ arguments: [Int], input: UnsafeRawBufferPointer? = nil,
    output: UnsafeMutableRawBufferPointer? = nil
) -> Int? {
    guard let mock = SyscallMock.current else { return nil }
    return mock.handle(name, arguments: arguments, input: input, output: output)
}
#endif

// MARK: - Sockets

@inline(never)
public func system_socket(_ domain: CInt, _ type: CInt, _ proto: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("socket", [Int(domain), Int(type), Int(proto)]) { return CInt(value) }
    #endif
    return socket(domain, type, proto)
}

@inline(never)
public func system_socketpair(
    _ domain: CInt, _ type: CInt, _ proto: CInt, _ fds: UnsafeMutablePointer<CInt>
) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("socketpair", [Int(domain), Int(type), Int(proto)]) { return CInt(value) }
    #endif
    return socketpair(domain, type, proto, fds)
}

@inline(never)
public func system_bind(_ fd: CInt, _ addr: UnsafePointer<sockaddr>, _ len: socklen_t) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("bind", [Int(fd), Int(len)], input: UnsafeRawBufferPointer(start: addr, count: Int(len))) {
        return CInt(value)
    }
    #endif
    return bind(fd, addr, len)
}

@inline(never)
public func system_connect(_ fd: CInt, _ addr: UnsafePointer<sockaddr>, _ len: socklen_t) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("connect", [Int(fd), Int(len)], input: UnsafeRawBufferPointer(start: addr, count: Int(len)))
    {
        return CInt(value)
    }
    #endif
    return connect(fd, addr, len)
}

@inline(never)
public func system_listen(_ fd: CInt, _ backlog: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("listen", [Int(fd), Int(backlog)]) { return CInt(value) }
    #endif
    return listen(fd, backlog)
}

/// accept(2) (Glibc's Swift module does not export the GNU accept4; callers set the flags with fcntl).
@inline(never)
public func system_accept(
    _ fd: CInt, _ addr: UnsafeMutablePointer<sockaddr>?, _ len: UnsafeMutablePointer<socklen_t>?
) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("accept", [Int(fd)]) { return CInt(value) }
    #endif
    return accept(fd, addr, len)
}

@inline(never)
public func system_send(_ fd: CInt, _ buffer: UnsafeRawPointer?, _ count: Int, _ flags: CInt) -> Int {
    #if ENABLE_MOCKING
    if let value = mocked(
        "send", [Int(fd), count, Int(flags)], input: UnsafeRawBufferPointer(start: buffer, count: count))
    {
        return value
    }
    #endif
    return send(fd, buffer, count, flags)
}

@inline(never)
public func system_recv(_ fd: CInt, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ flags: CInt) -> Int {
    #if ENABLE_MOCKING
    if let value = mocked(
        "recv", [Int(fd), count, Int(flags)], output: UnsafeMutableRawBufferPointer(start: buffer, count: count))
    {
        return value
    }
    #endif
    return recv(fd, buffer, count, flags)
}

// sendmmsg(2) and recvmmsg(2) are GNU extensions the Glibc Swift module does not export (like accept4); they are
// looked up once in the C library. `struct mmsghdr` is `{ struct msghdr msg_hdr; unsigned int msg_len; }`: see
// `MessageHeaders` for the layout the callers build.
private typealias SendMultipleFunction = @convention(c) (CInt, UnsafeMutableRawPointer?, CUnsignedInt, CInt) -> CInt
private typealias ReceiveMultipleFunction =
    @convention(c) (CInt, UnsafeMutableRawPointer?, CUnsignedInt, CInt, UnsafeMutableRawPointer?) -> CInt

private let sendMultipleFunction: SendMultipleFunction? = dlsym(nil, "sendmmsg").map {
    unsafeBitCast($0, to: SendMultipleFunction.self)
}
private let receiveMultipleFunction: ReceiveMultipleFunction? = dlsym(nil, "recvmmsg").map {
    unsafeBitCast($0, to: ReceiveMultipleFunction.self)
}

/// sendmmsg(2): sends `count` messages described by the `mmsghdr` array at `headers`; returns how many were sent
/// (each header's `msg_len` is set to its byte count). ENOSYS when the C library has no sendmmsg. Under a mock the
/// step's value is the message count and the input is the first message's bytes.
@inline(never)
public func system_sendmmsg(
    _ fd: CInt, _ headers: UnsafeMutableRawPointer, _ count: CUnsignedInt, _ flags: CInt
) -> CInt {
    #if ENABLE_MOCKING
    if SyscallMock.current != nil {
        let first = count > 0 ? MessageHeaders.firstIOVector(headers) : nil
        if let value = mocked("sendmmsg", [Int(fd), Int(count), Int(flags)], input: first) { return CInt(value) }
    }
    #endif
    guard let function = sendMultipleFunction else {
        errno = ENOSYS
        return -1
    }
    return function(fd, headers, count, flags)
}

/// recvmmsg(2) without a timeout: receives up to `count` messages into the `mmsghdr` array at `headers`; returns how
/// many arrived (each header's `msg_len` and `msg_hdr.msg_flags` are set). ENOSYS when the C library has no
/// recvmmsg. Under a mock a step answers one message: `.bytes` fills the first buffer and sets its `msg_len`,
/// `.returns(n)` is one message of n bytes, `.fails` the errno.
@inline(never)
public func system_recvmmsg(
    _ fd: CInt, _ headers: UnsafeMutableRawPointer, _ count: CUnsignedInt, _ flags: CInt
) -> CInt {
    #if ENABLE_MOCKING
    if SyscallMock.current != nil, count > 0 {
        let first = MessageHeaders.firstIOVector(headers)
        if let value = mocked(
            "recvmmsg", [Int(fd), Int(count), Int(flags)],
            output: UnsafeMutableRawBufferPointer(mutating: first))
        {
            guard value >= 0 else { return -1 }
            MessageHeaders.setReceived(headers, index: 0, length: value, flags: 0)
            return 1
        }
    }
    #endif
    guard let function = receiveMultipleFunction else {
        errno = ENOSYS
        return -1
    }
    return function(fd, headers, count, flags, nil)
}

@inline(never)
public func system_setsockopt(
    _ fd: CInt, _ level: CInt, _ name: CInt, _ value: UnsafeRawPointer?, _ len: socklen_t
) -> CInt {
    #if ENABLE_MOCKING
    if let result = mocked(
        "setsockopt", [Int(fd), Int(level), Int(name)], input: UnsafeRawBufferPointer(start: value, count: Int(len)))
    {
        return CInt(result)
    }
    #endif
    return setsockopt(fd, level, name, value, len)
}

@inline(never)
public func system_getsockopt(
    _ fd: CInt, _ level: CInt, _ name: CInt, _ value: UnsafeMutableRawPointer?, _ len: UnsafeMutablePointer<socklen_t>?
) -> CInt {
    #if ENABLE_MOCKING
    let capacity = Int(len?.pointee ?? 0)
    if let result = mocked(
        "getsockopt", [Int(fd), Int(level), Int(name)],
        output: UnsafeMutableRawBufferPointer(start: value, count: capacity))
    {
        return CInt(result)
    }
    #endif
    return getsockopt(fd, level, name, value, len)
}

@inline(never)
public func system_shutdown(_ fd: CInt, _ how: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("shutdown", [Int(fd), Int(how)]) { return CInt(value) }
    #endif
    return shutdown(fd, how)
}

@inline(never)
public func system_poll(_ fds: UnsafeMutablePointer<pollfd>?, _ count: nfds_t, _ timeout: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("poll", [Int(count), Int(timeout)]) { return CInt(value) }
    #endif
    return poll(fds, count, timeout)
}

// MARK: - epoll

// epoll_create1(2), epoll_ctl(2) and epoll_wait(2) are not exported by the Glibc Swift module either; they are looked
// up once like sendmmsg. `struct epoll_event` is `{ uint32_t events; uint64_t data; }`, packed on x86_64 (12 bytes,
// data at offset 4) and naturally aligned elsewhere (16 bytes, data at 8): see `EpollEvents`.
private typealias EpollCreateFunction = @convention(c) (CInt) -> CInt
private typealias EpollControlFunction = @convention(c) (CInt, CInt, CInt, UnsafeMutableRawPointer?) -> CInt
private typealias EpollWaitFunction = @convention(c) (CInt, UnsafeMutableRawPointer?, CInt, CInt) -> CInt

private let epollCreateFunction: EpollCreateFunction? = dlsym(nil, "epoll_create1").map {
    unsafeBitCast($0, to: EpollCreateFunction.self)
}
private let epollControlFunction: EpollControlFunction? = dlsym(nil, "epoll_ctl").map {
    unsafeBitCast($0, to: EpollControlFunction.self)
}
private let epollWaitFunction: EpollWaitFunction? = dlsym(nil, "epoll_wait").map {
    unsafeBitCast($0, to: EpollWaitFunction.self)
}

/// epoll_create1(2). ENOSYS when the C library has none.
@inline(never)
public func system_epoll_create1(_ flags: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("epoll_create1", [Int(flags)]) { return CInt(value) }
    #endif
    guard let function = epollCreateFunction else {
        errno = ENOSYS
        return -1
    }
    return function(flags)
}

/// epoll_ctl(2) with one `struct epoll_event` at `event` (nil for EPOLL_CTL_DEL).
@inline(never)
public func system_epoll_ctl(_ epfd: CInt, _ op: CInt, _ fd: CInt, _ event: UnsafeMutableRawPointer?) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("epoll_ctl", [Int(epfd), Int(op), Int(fd)]) { return CInt(value) }
    #endif
    guard let function = epollControlFunction else {
        errno = ENOSYS
        return -1
    }
    return function(epfd, op, fd, event)
}

/// epoll_wait(2) into an array of `maxEvents` `struct epoll_event` at `events`.
@inline(never)
public func system_epoll_wait(
    _ epfd: CInt, _ events: UnsafeMutableRawPointer, _ maxEvents: CInt, _ timeout: CInt
) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("epoll_wait", [Int(epfd), Int(maxEvents), Int(timeout)]) { return CInt(value) }
    #endif
    guard let function = epollWaitFunction else {
        errno = ENOSYS
        return -1
    }
    return function(epfd, events, maxEvents, timeout)
}

// MARK: - Signals

/// Ignores (`ignore == true`) or restores the default action of a signal; Dispatch signal sources still see an
/// ignored signal. The corresponding C function is `signal`.
@inline(never)
public func system_setSignalIgnored(_ number: CInt, _ ignore: Bool) {
    _ = signal(number, ignore ? SIG_IGN : SIG_DFL)
}

// MARK: - Descriptors and files

@inline(never)
public func system_close(_ fd: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("close", [Int(fd)]) { return CInt(value) }
    #endif
    return close(fd)
}

@inline(never)
public func system_fcntl(_ fd: CInt, _ cmd: CInt, _ arg: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("fcntl", [Int(fd), Int(cmd), Int(arg)]) { return CInt(value) }
    #endif
    return fcntl(fd, cmd, arg)
}

// ioctl(2) is variadic and unavailable in Swift's Glibc module; a Bluetooth ioctl wrapper needs a `static inline`
// helper in CBlueZShim, wrapped in the Bluetooth section below.

@inline(never)
public func system_open(_ path: UnsafePointer<CChar>, _ flags: CInt, _ mode: mode_t) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("open", [Int(flags), Int(mode)]) { return CInt(value) }
    #endif
    return open(path, flags, mode)
}

@inline(never)
public func system_read(_ fd: CInt, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if ENABLE_MOCKING
    if let value = mocked("read", [Int(fd), count], output: UnsafeMutableRawBufferPointer(start: buffer, count: count))
    {
        return value
    }
    #endif
    return read(fd, buffer, count)
}

@inline(never)
public func system_write(_ fd: CInt, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    #if ENABLE_MOCKING
    if let value = mocked("write", [Int(fd), count], input: UnsafeRawBufferPointer(start: buffer, count: count)) {
        return value
    }
    #endif
    return write(fd, buffer, count)
}

@inline(never)
public func system_fsync(_ fd: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("fsync", [Int(fd)]) { return CInt(value) }
    #endif
    return fsync(fd)
}

/// isatty(3): whether the descriptor is a terminal (progress bars and live views redraw only there).
@inline(never)
public func system_isatty(_ fd: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("isatty", [Int(fd)]) { return CInt(value) }
    #endif
    return isatty(fd)
}

@inline(never)
public func system_rename(_ old: UnsafePointer<CChar>, _ new: UnsafePointer<CChar>) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("rename", []) { return CInt(value) }
    #endif
    return rename(old, new)
}

@inline(never)
public func system_unlink(_ path: UnsafePointer<CChar>) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("unlink", []) { return CInt(value) }
    #endif
    return unlink(path)
}

@inline(never)
public func system_mkdir(_ path: UnsafePointer<CChar>, _ mode: mode_t) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("mkdir", [Int(mode)]) { return CInt(value) }
    #endif
    return mkdir(path, mode)
}

/// pipe(2) (Glibc's Swift module does not export the GNU pipe2; callers set the flags with fcntl).
@inline(never)
public func system_pipe(_ fds: UnsafeMutablePointer<CInt>) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("pipe", []) { return CInt(value) }
    #endif
    return pipe(fds)
}

/// Lists a directory's entry names (without "." and ".."). Wraps opendir/readdir/closedir.
@inline(never)
public func system_listDirectory(_ path: UnsafePointer<CChar>) -> Result<[String], Errno> {
    #if ENABLE_MOCKING
    if let value = mocked("opendir", []), value < 0 { return .failure(currentErrno()) }
    #endif
    guard let directory = opendir(path) else { return .failure(currentErrno()) }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return .success(names)
}

/// Wall-clock time (CLOCK_REALTIME) in microseconds since 1970-01-01 UTC.
@inline(never)
public func system_realtimeMicroseconds() -> Int64 {
    var now = timespec()
    _ = clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1_000
}

/// Sets errno on this thread (used by the mock to report a scripted failure).
func system_setErrno(_ value: Errno) { errno = value.rawValue }

// MARK: - Bluetooth

/// ioctl(2) whose argument is a buffer the kernel reads and fills in place (HCIGETDEVLIST, HCIGETDEVINFO). Under a
/// mock, a `.bytes` step is copied into the buffer.
@inline(never)
public func system_ioctlBuffer(_ fd: CInt, _ request: UInt, _ buffer: UnsafeMutableRawBufferPointer) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("ioctl", [Int(fd), Int(bitPattern: request)], output: buffer) { return CInt(value) }
    #endif
    guard let argument = buffer.baseAddress else {
        errno = EINVAL
        return -1
    }
    return ioctl(fd, request, argument)
}

/// ioctl(fd, TIOCOUTQ, &count) (TIOCOUTQ is SIOCOUTQ): what the socket's send queue holds. The meaning depends on
/// the family: TCP and AF_UNIX answer the bytes not yet sent, Bluetooth sockets the free space of the send buffer
/// (`sk_sndbuf` less what is still allocated; net/bluetooth/af_bluetooth.c), so callers compare it with SO_SNDBUF.
/// Under a mock, a `.bytes` step supplies the int (4 little-endian bytes).
@inline(never)
public func system_ioctlSendQueue(_ fd: CInt, _ count: UnsafeMutablePointer<CInt>) -> CInt {
    #if ENABLE_MOCKING
    let output = UnsafeMutableRawBufferPointer(start: count, count: MemoryLayout<CInt>.size)
    if let value = mocked("ioctl", [Int(fd), Int(TIOCOUTQ)], output: output) { return value < 0 ? -1 : 0 }
    #endif
    return ioctl(fd, UInt(TIOCOUTQ), count)
}
