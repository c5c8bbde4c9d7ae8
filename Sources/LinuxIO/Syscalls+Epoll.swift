import CLinuxShim
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// MARK: - epoll

/// epoll_create1(2) (sys/epoll.h, through CLinuxShim).
@inline(never)
public func system_epoll_create1(_ flags: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("epoll_create1", [Int(flags)]) { return CInt(value) }
    #endif
    return epoll_create1(flags)
}

/// epoll_ctl(2) with one `struct epoll_event` (nil for EPOLL_CTL_DEL).
@inline(never)
public func system_epoll_ctl(_ epfd: CInt, _ op: CInt, _ fd: CInt, _ event: UnsafeMutablePointer<epoll_event>?) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("epoll_ctl", [Int(epfd), Int(op), Int(fd)]) { return CInt(value) }
    #endif
    return epoll_ctl(epfd, op, fd, event)
}

/// epoll_wait(2) into an array of `maxEvents` `struct epoll_event`.
@inline(never)
public func system_epoll_wait(
    _ epfd: CInt, _ events: UnsafeMutablePointer<epoll_event>, _ maxEvents: CInt, _ timeout: CInt
) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("epoll_wait", [Int(epfd), Int(maxEvents), Int(timeout)]) { return CInt(value) }
    #endif
    return epoll_wait(epfd, events, maxEvents, timeout)
}
