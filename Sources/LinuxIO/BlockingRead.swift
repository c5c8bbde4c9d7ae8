#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

/// Blocking reads of a pipe or file descriptor, for threads that do nothing else (a child's output).
///
/// Foundation's `FileHandle.availableData` and `readDataToEndOfFile()` end the process on any read error, EINTR
/// included (swift-corelibs-foundation reads with `try!`), so a signal arriving at the wrong moment crashed the
/// batch and the test harness. These retry EINTR and report any other failure as a typed error.
public enum BlockingRead {
    /// Up to `maximum` bytes from `fd`, waiting until some arrive; empty at end of file.
    public static func chunk(fd: CInt, maximum: Int = 65_536) throws(Errno) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: max(1, maximum))
        let count = buffer.withUnsafeMutableBytes { raw in
            valueOrErrno(retryOnInterrupt: true) { system_read(fd, raw.baseAddress, raw.count) }
        }
        switch count {
        case .success(let read):
            buffer.removeSubrange(read...)
            return buffer
        case .failure(let error):
            throw error
        }
    }

    /// Everything until end of file.
    public static func toEnd(fd: CInt) throws(Errno) -> [UInt8] {
        var all: [UInt8] = []
        while true {
            let piece = try chunk(fd: fd)
            if piece.isEmpty { return all }
            all.append(contentsOf: piece)
        }
    }
}
