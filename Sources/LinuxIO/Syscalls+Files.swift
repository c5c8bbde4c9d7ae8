#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// MARK: - Signals

/// Ignores (`ignore == true`) or restores the default action of a signal; Dispatch signal sources still see an
/// ignored signal. The corresponding C function is `signal`.
@inline(never)
public func system_setSignalIgnored(_ number: CInt, _ ignore: Bool) {
    _ = signal(number, ignore ? SIG_IGN : SIG_DFL)
}

// MARK: - Descriptors and files

@inline(never)
public func system_close(_ fd: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("close", [Int(fd)]) { return CInt(value) }
    #endif
    return close(fd)
}

@inline(never)
public func system_fcntl(_ fd: CInt, _ cmd: CInt, _ arg: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("fcntl", [Int(fd), Int(cmd), Int(arg)]) { return CInt(value) }
    #endif
    return fcntl(fd, cmd, arg)
}

// ioctl(2): the wrappers are in Syscalls+Bluetooth.swift (Glibc's Swift overlay declares the pointer form).

@inline(never)
public func system_open(_ path: UnsafePointer<CChar>, _ flags: CInt, _ mode: mode_t) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("open", [Int(flags), Int(mode)]) { return CInt(value) }
    #endif
    return open(path, flags, mode)
}

@inline(never)
public func system_read(_ fd: CInt, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if ENABLE_MOCKING
    if let value = mocked("read", [Int(fd), count], output: UnsafeMutableRawBufferPointer(start: buffer, count: count))
    {
        return value
    }
    #endif
    return read(fd, buffer, count)
}

@inline(never)
public func system_write(_ fd: CInt, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    #if ENABLE_MOCKING
    if let value = mocked("write", [Int(fd), count], input: UnsafeRawBufferPointer(start: buffer, count: count)) {
        return value
    }
    #endif
    return write(fd, buffer, count)
}

@inline(never)
public func system_fsync(_ fd: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("fsync", [Int(fd)]) { return CInt(value) }
    #endif
    return fsync(fd)
}

/// isatty(3): whether the descriptor is a terminal (progress bars and live views redraw only there).
@inline(never)
public func system_isatty(_ fd: CInt) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("isatty", [Int(fd)]) { return CInt(value) }
    #endif
    return isatty(fd)
}

@inline(never)
public func system_rename(_ old: UnsafePointer<CChar>, _ new: UnsafePointer<CChar>) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("rename", []) { return CInt(value) }
    #endif
    return rename(old, new)
}

@inline(never)
public func system_unlink(_ path: UnsafePointer<CChar>) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("unlink", []) { return CInt(value) }
    #endif
    return unlink(path)
}

@inline(never)
public func system_mkdir(_ path: UnsafePointer<CChar>, _ mode: mode_t) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("mkdir", [Int(mode)]) { return CInt(value) }
    #endif
    return mkdir(path, mode)
}

/// pipe(2) (Glibc's Swift module does not export the GNU pipe2; callers set the flags with fcntl).
@inline(never)
public func system_pipe(_ fds: UnsafeMutablePointer<CInt>) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("pipe", []) { return CInt(value) }
    #endif
    return pipe(fds)
}

/// Lists a directory's entry names (without "." and ".."). Wraps opendir/readdir/closedir.
@inline(never)
public func system_listDirectory(_ path: UnsafePointer<CChar>) -> Result<[String], Errno> {
    #if ENABLE_MOCKING
    if let value = mocked("opendir", []), value < 0 { return .failure(currentErrno()) }
    #endif
    guard let directory = opendir(path) else { return .failure(currentErrno()) }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return .success(names)
}

