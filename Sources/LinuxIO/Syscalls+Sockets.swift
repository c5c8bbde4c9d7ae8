#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

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

