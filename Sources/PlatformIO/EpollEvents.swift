/// An array of Linux `struct epoll_event` for epoll_wait(2), and the constants of sys/epoll.h.
///
///     struct epoll_event { uint32_t events; epoll_data_t data; }   // data: a uint64_t here (the descriptor)
///     x86_64:     packed, 12 bytes: events @0, data @4 (unaligned)
///     elsewhere:  16 bytes: events @0, padding, data @8
///
/// Not thread-safe: the reactor thread owns the array; `withEvent` builds a single event on the stack.
final class EpollEvents {
    #if arch(x86_64)
    static let size = 12
    static let dataOffset = 4
    #else
    static let size = 16
    static let dataOffset = 8
    #endif

    static let control = (add: CInt(1), delete: CInt(2), modify: CInt(3))
    static let readable: UInt32 = 0x001  // EPOLLIN
    static let writable: UInt32 = 0x004  // EPOLLOUT
    static let error: UInt32 = 0x008  // EPOLLERR
    static let hangUp: UInt32 = 0x010  // EPOLLHUP
    static let oneShot: UInt32 = 1 << 30  // EPOLLONESHOT
    static let closeOnExec: CInt = 0o2_000_000  // EPOLL_CLOEXEC (= O_CLOEXEC)

    let capacity: Int
    let buffer: UnsafeMutableRawPointer

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        buffer = UnsafeMutableRawPointer.allocate(byteCount: self.capacity * Self.size, alignment: 8)
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: self.capacity * Self.size)
    }

    deinit { buffer.deallocate() }

    func events(_ index: Int) -> UInt32 { buffer.loadUnaligned(fromByteOffset: index * Self.size, as: UInt32.self) }

    func data(_ index: Int) -> UInt64 {
        buffer.loadUnaligned(fromByteOffset: index * Self.size + Self.dataOffset, as: UInt64.self)
    }

    /// Calls `body` with one `struct epoll_event` holding `events` and `data`.
    static func withEvent<R>(events: UInt32, data: UInt64, _ body: (UnsafeMutableRawPointer?) -> R) -> R {
        var storage: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &storage) { raw in
            raw.storeBytes(of: events, toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: data, toByteOffset: dataOffset, as: UInt64.self)
            return body(raw.baseAddress)
        }
    }
}
