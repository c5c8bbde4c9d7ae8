#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

/// The read end of a pipe (a child's output) read on the ``Reactor``: no thread blocks, and every read has a deadline.
public final class PipeReader: Sendable {
    public let fd: CInt

    /// Takes over `fd` (made non-blocking here); ``close()`` closes it.
    public init(fd: CInt) throws(Errno) {
        self.fd = fd
        let flags = try valueOrErrno { system_fcntl(fd, F_GETFL, 0) }.get()
        _ = try valueOrErrno { system_fcntl(fd, F_SETFL, flags | O_NONBLOCK) }.get()
    }

    /// Up to `maximum` bytes, waiting at most `timeout` (nil: no deadline) for some; empty at end of file. Throws
    /// ETIMEDOUT when nothing came within `timeout`, ECANCELED when the task was cancelled.
    public func read(maximum: Int = 65_536, timeout: Duration?) async throws(Errno) -> [UInt8] {
        let deadline = timeout.map { ContinuousClock.now.advanced(by: $0) }
        var buffer = [UInt8](repeating: 0, count: max(1, maximum))
        while true {
            let result = buffer.withUnsafeMutableBytes { raw in
                ioResultOrErrno { system_read(fd, raw.baseAddress, raw.count) }
            }
            switch result {
            case .success(.processed(let count)):
                buffer.removeSubrange(count...)
                return buffer
            case .success(.wouldBlock):
                let remaining = deadline.map { ContinuousClock.now.duration(to: $0) }
                if let remaining, remaining <= .zero { throw Errno.timedOut }
                #if ENABLE_MOCKING
                if let mock = SyscallMock.current {
                    mock.recordWait("waitReadable", fd: fd)
                    continue
                }
                #endif
                try await Reactor.shared.wait(for: fd, readable: true, timeout: remaining)
            case .failure(let error):
                throw error
            }
        }
    }

    /// Everything until end of file, each wait for more bounded by `idle` (ETIMEDOUT when the writer goes quiet).
    public func readToEnd(idle: Duration?) async throws(Errno) -> [UInt8] {
        var all: [UInt8] = []
        while true {
            let piece = try await read(timeout: idle)
            if piece.isEmpty { return all }
            all += piece
        }
    }

    public func close() {
        Reactor.shared.cancelWaits(on: fd)
        _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) }
    }
}
