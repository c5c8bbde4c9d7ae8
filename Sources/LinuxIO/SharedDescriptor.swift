import Synchronization
import SystemPackage

/// A descriptor that several tasks use while any of them may close it: the number stays this descriptor's until
/// the last use has ended.
///
/// A descriptor number is only safe to use while it is open: close(2) frees it, and the next socket(2), accept(2),
/// pipe(2) or open(2) anywhere in the process gets the same number. A task that found the socket empty (EAGAIN)
/// just before another task closed it would then wait on, or send to, that stranger's descriptor: one full test run
/// in about seven hung that way, every task suspended behind a receive parked on someone else's idle socket
/// (docs/reliability.md, "The hang"). So every use holds a lease on the number (``lease()`` ... ``release()``), and
/// ``close(shutdown:)`` does what must happen at once (shutdown(2) so that the peer sees the end; the reactor
/// retires the number, so that its waits, and any wait that registers later, end with ECANCELED) while close(2)
/// itself runs when the last lease ends.
public final class SharedDescriptor: Sendable, CustomStringConvertible {
    private struct State {
        var descriptor: SocketDescriptor?
        var leases = 0
        var closing = false
    }

    private let state: Mutex<State>

    /// Takes ownership of `descriptor`. Like a ``SocketDescriptor``, it is closed only by ``close(shutdown:)``.
    public init(_ descriptor: SocketDescriptor) {
        state = Mutex(State(descriptor: descriptor))
    }

    public var description: String { state.withLock { $0.descriptor?.description ?? "closed" } }

    /// The descriptor until ``close(shutdown:)`` is called (for socket options; a use that may suspend, or that a
    /// concurrent close must not overtake, takes a ``lease()`` instead).
    public var current: SocketDescriptor? { state.withLock { $0.closing ? nil : $0.descriptor } }

    /// True once ``close(shutdown:)`` has been called.
    public var isClosed: Bool { state.withLock { $0.closing } }

    /// The descriptor, held open until the matching ``release()``; nil once closing.
    public func lease() -> SocketDescriptor? {
        state.withLock { state -> SocketDescriptor? in
            guard !state.closing, let fd = state.descriptor else { return nil }
            state.leases += 1
            return fd
        }
    }

    /// Ends a lease; the last one after ``close(shutdown:)`` closes the descriptor.
    public func release() {
        let last = state.withLock { state -> SocketDescriptor? in
            state.leases -= 1
            guard state.closing, state.leases == 0 else { return nil }
            defer { state.descriptor = nil }
            return state.descriptor
        }
        guard let last else { return }
        try? last.close()  // the owner asked for the close long ago; nobody is left to tell about a failure
    }

    /// Closes (idempotent, from any thread): shutdown(2) when `shutdown` (wakes the peer and, through hang-up, any
    /// reader), the reactor's waits on the number end with ECANCELED (now and whenever one registers later), then
    /// close(2) once no lease is held. Returns false when it was closed already.
    @discardableResult
    public func close(shutdown: Bool = true) -> Bool {
        // The closer holds a lease of its own while it works, so that a lease ending meanwhile cannot close(2) the
        // number before the reactor has retired it.
        let fd = state.withLock { state -> SocketDescriptor? in
            guard !state.closing, let fd = state.descriptor else { return nil }
            state.closing = true
            state.leases += 1
            return fd
        }
        guard let fd else { return false }
        if shutdown { try? fd.shutdown() }  // ENOTCONN when the peer left first, or a listening socket: fine
        Reactor.shared.retire(fd.rawValue)
        release()
        return true
    }
}
