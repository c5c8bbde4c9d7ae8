#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

/// Small blocking file helpers over `Syscalls.swift` (captures, advertisement files, directory scans).
public enum FileIO {
    /// Opens (creating or truncating) a file for writing; returns the descriptor.
    public static func create(_ path: String, mode: mode_t = 0o644) throws(Errno) -> CInt {
        try valueOrErrno { system_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode) }.get()
    }

    /// Writes all of `bytes` (short writes continue).
    public static func writeAll(_ fd: CInt, _ bytes: [UInt8]) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            let written = try bytes.withUnsafeBytes { raw in
                valueOrErrno { system_write(fd, raw.baseAddress.map { $0 + offset }, raw.count - offset) }
            }.get()
            offset += written
        }
    }

    public static func close(_ fd: CInt) throws(Errno) {
        _ = try valueOrErrno(retryOnInterrupt: false) { system_close(fd) }.get()
    }

    public static func fsync(_ fd: CInt) throws(Errno) {
        _ = try valueOrErrno { system_fsync(fd) }.get()
    }

    /// The whole content of a file.
    public static func read(_ path: String) throws(Errno) -> [UInt8] {
        let fd = try valueOrErrno { system_open(path, O_RDONLY | O_CLOEXEC, 0) }.get()
        defer { _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) } }
        var content: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = try chunk.withUnsafeMutableBytes { raw in
                valueOrErrno { system_read(fd, raw.baseAddress, raw.count) }
            }.get()
            if count == 0 { return content }
            content += chunk[0..<count]
        }
    }

    /// Writes a file atomically: a temporary file in the same directory, then rename(2) over `path`.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], temporaryPath: String) throws(Errno) {
        let fd = try create(temporaryPath)
        do throws(Errno) {
            try writeAll(fd, bytes)
            try close(fd)
        } catch {
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) }  // already failing; report the first error
            throw error
        }
        _ = try valueOrErrno { system_rename(temporaryPath, path) }.get()
    }

    public static func unlink(_ path: String) throws(Errno) {
        _ = try valueOrErrno { system_unlink(path) }.get()
    }

    /// Creates a directory; an existing one is fine.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o755) throws(Errno) {
        switch valueOrErrno({ system_mkdir(path, mode) }) {
        case .success: return
        case .failure(let error) where error == .fileExists: return
        case .failure(let error): throw error
        }
    }

    /// Entry names of a directory (no "." or "..").
    public static func listDirectory(_ path: String) throws(Errno) -> [String] {
        try system_listDirectory(path).get()
    }
}
