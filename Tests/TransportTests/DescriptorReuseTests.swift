import BLECore
import Synchronization
import SystemPackage
import Testing
import VirtualRadio

@testable import LinuxIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The hang of the test suite (issue 21 point 5): a link closed by one task while another task had just found its
/// socket empty (EAGAIN) and was about to wait. The close freed the descriptor number, the next socket anywhere in the
/// process got the same number, and the wait registered on that stranger's socket: it never woke, and a process
/// whose tasks all awaited that link sat with every task suspended. The hooks below run the closing task at exactly
/// that moment, and a "stranger" then opens a descriptor at the lowest free number at or above the bearer's (what
/// the kernel does for the next socket(2), accept(2) or pipe(2) anywhere in the process).
@Suite(.timeLimit(.minutes(5))) struct DescriptorReuseTests {
    /// The descriptors a stranger opened in a hook (closed at the end of each test).
    final class Strangers: Sendable {
        private let fds = Mutex<[CInt]>([])

        /// Opens a socket pair and a duplicate of one end at the lowest free number >= `number`; with `full`, that
        /// end's send buffer is filled first (so that it is not writable either).
        func open(atOrAbove number: CInt, full: Bool = false) {
            guard let (x, y) = try? SocketDescriptor.seqPacketPair() else { return }
            if full {
                try? x.setSendBufferSize(4096)
                while case .processed? = try? x.send(Array(repeating: 0x53, count: 200)) {}
            }
            let duplicate = system_fcntl(x.rawValue, F_DUPFD_CLOEXEC, number)
            fds.withLock { $0 += [x.rawValue, y.rawValue] + (duplicate >= 0 ? [duplicate] : []) }
        }

        var numbers: [CInt] { fds.withLock { $0 } }

        /// Closes them; `SocketDescriptor.close()` also ends any wait still registered on their numbers.
        func closeAll() {
            for fd in fds.withLock({ $0 }) { try? SocketDescriptor(rawValue: fd).close() }
        }
    }

    /// Yields until `done()` or a wait is registered on `number` (each iteration lets the other tasks run).
    func settle(_ number: CInt, until done: () -> Bool) async {
        var spins = 0
        while !done() && Reactor.shared.pendingWaitCount(on: number) == 0 && spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
    }

    @Test func aCloseJustBeforeTheReceiveWaitsEndsTheReceive() async throws {
        let (bearer, peer) = try SeqPacketBearer.makeSocketPair()
        let number = try #require(bearer.socket).rawValue
        let strangers = Strangers()
        bearer.setBeforeWaitHook {
            bearer.closeNow()  // the link's owner closes it now (a reset, a Ctrl-C, the end of a transfer)
            strangers.open(atOrAbove: number)
        }
        let finished = Mutex(false)
        let receiver = Task {
            defer { finished.withLock { $0 = true } }
            return try await bearer.receive()
        }
        await settle(number) { finished.withLock { $0 } }
        #expect(
            Reactor.shared.pendingWaitCount(on: number) == 0,
            "the receive waits on descriptor \(number), which is another socket's now (strangers: \(strangers.numbers))")
        strangers.closeAll()  // ends a stranded wait, so that the test itself always ends
        await #expect(throws: BearerError(.closed)) { _ = try await receiver.value }
        await peer.close()
    }

    @Test func aCloseJustBeforeTheSendWaitsEndsTheSend() async throws {
        let (bearer, peer) = try SeqPacketBearer.makeSocketPair()
        let fd = try #require(bearer.socket)
        let number = fd.rawValue
        try fd.setSendBufferSize(4096)
        // Fill the socket until the kernel says EAGAIN: the bearer's next send must wait for writability.
        while case .processed = try fd.send(Array(repeating: 0x52, count: 200)) {}
        let strangers = Strangers()
        bearer.setBeforeWaitHook {
            bearer.closeNow()
            strangers.open(atOrAbove: number, full: true)
        }
        let finished = Mutex(false)
        let sender = Task {
            defer { finished.withLock { $0 = true } }
            try await bearer.send([0x52, 0x07, 0x00, 0xEE])
        }
        await settle(number) { finished.withLock { $0 } }
        #expect(
            Reactor.shared.pendingWaitCount(on: number) == 0,
            "the send waits on descriptor \(number), which is another socket's now (strangers: \(strangers.numbers))")
        strangers.closeAll()
        await #expect(throws: BearerError(.closed)) { try await sender.value }
        await peer.close()
    }

    /// The reactor's other half of the same hang: a number it believed armed (the last wait on it timed out) closed
    /// by someone other than `SocketDescriptor.close()` (a Foundation pipe, a stranded waiter's stranger). epoll
    /// forgot the registration with the file, so the next owner of the number must be armed again, not skipped as
    /// "armed already", or its waits never end.
    @Test func aNumberClosedBehindTheReactorsBackIsArmedForItsNextOwner() async throws {
        let (a, b) = try SocketDescriptor.seqPacketPair()
        await #expect(throws: Errno.timedOut) { try await a.waitReadable(timeout: .milliseconds(1)) }
        let (x, y) = try SocketDescriptor.seqPacketPair()
        // dup2 closes a's socket and puts x's at its number in one step, without telling the reactor.
        #expect(dup2(x.rawValue, a.rawValue) == a.rawValue)
        defer {
            for fd in [a, b, x, y] { try? fd.close() }  // test teardown
        }
        guard case .processed(4) = try y.send([0x1B, 0x03, 0x00, 0x01]) else {
            Issue.record("the peer could not send")
            return
        }
        // Readable now: the wait must see it (deadline only so that a failure ends the test).
        try await Reactor.shared.wait(for: a.rawValue, readable: true, timeout: .seconds(10))
    }
}
