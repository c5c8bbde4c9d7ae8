#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Waits for the reader of a pipe to go away.
///
/// The write end of a pipe reports POLLERR as soon as no reader is left (pipe(7); Linux `pipe_poll`), and `poll(2)`
/// always reports POLLERR and POLLHUP even when no event is asked for. So `poll` with no events and no timeout wakes
/// for exactly that; on a regular file or /dev/null it never wakes. Blocks the calling thread: call it on a thread
/// of its own.
public enum PipeReaderWatch {
    /// Returns true when `fd`'s reader is gone (POLLERR or POLLHUP), false when `fd` is not open or `poll` fails.
    public static func waitUntilReaderGone(fd: CInt) -> Bool {
        var entry = pollfd(fd: fd, events: 0, revents: 0)
        for _ in 0..<1000 {
            // Negative: interrupted by a signal (EINTR); wait again.
            if system_poll(&entry, 1, -1) >= 0 { break }
        }
        return entry.revents & (Int16(POLLERR) | Int16(POLLHUP)) != 0
    }
}
