import CLinuxShim

/// An array of Linux `struct epoll_event` for epoll_wait(2) (the C type, imported from `<sys/epoll.h>` through
/// CLinuxShim: packed on x86_64 as the kernel wants it), and the constants of sys/epoll.h.
///
/// Not thread-safe: the reactor thread owns the array; `withEvent` builds a single event on the stack.
final class EpollEvents {
    static let control = (add: CInt(EPOLL_CTL_ADD), delete: CInt(EPOLL_CTL_DEL), modify: CInt(EPOLL_CTL_MOD))
    static let readable = UInt32(EPOLLIN.rawValue)
    static let writable = UInt32(EPOLLOUT.rawValue)
    static let error = UInt32(EPOLLERR.rawValue)
    static let hangUp = UInt32(EPOLLHUP.rawValue)
    static let oneShot = UInt32(EPOLLONESHOT.rawValue)
    static let closeOnExec = CInt(EPOLL_CLOEXEC)

    let capacity: Int
    let buffer: UnsafeMutablePointer<epoll_event>

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        buffer = UnsafeMutablePointer<epoll_event>.allocate(capacity: self.capacity)
        buffer.initialize(repeating: epoll_event(), count: self.capacity)
    }

    deinit { buffer.deallocate() }

    func events(_ index: Int) -> UInt32 { buffer[index].events }

    func data(_ index: Int) -> UInt64 { buffer[index].data.u64 }

    /// Calls `body` with one `struct epoll_event` holding `events` and `data`.
    static func withEvent<R>(events: UInt32, data: UInt64, _ body: (UnsafeMutablePointer<epoll_event>?) -> R) -> R {
        var event = epoll_event()
        event.events = events
        event.data.u64 = data
        return withUnsafeMutablePointer(to: &event) { body($0) }
    }
}
