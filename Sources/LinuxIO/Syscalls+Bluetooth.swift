#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// MARK: - Bluetooth

/// ioctl(2) whose argument is a buffer the kernel reads and fills in place (HCIGETDEVLIST, HCIGETDEVINFO). Under a
/// mock, a `.bytes` step is copied into the buffer.
@inline(never)
public func system_ioctlBuffer(_ fd: CInt, _ request: UInt, _ buffer: UnsafeMutableRawBufferPointer) -> CInt {
    #if ENABLE_MOCKING
    if let value = mocked("ioctl", [Int(fd), Int(bitPattern: request)], output: buffer) { return CInt(value) }
    #endif
    guard let argument = buffer.baseAddress else {
        errno = EINVAL
        return -1
    }
    return ioctl(fd, request, argument)
}

/// ioctl(fd, TIOCOUTQ, &count) (TIOCOUTQ is SIOCOUTQ): what the socket's send queue holds. The meaning depends on
/// the family: TCP and AF_UNIX answer the bytes not yet sent, Bluetooth sockets the free space of the send buffer
/// (`sk_sndbuf` less what is still allocated; net/bluetooth/af_bluetooth.c), so callers compare it with SO_SNDBUF.
/// Under a mock, a `.bytes` step supplies the int (4 little-endian bytes).
@inline(never)
public func system_ioctlSendQueue(_ fd: CInt, _ count: UnsafeMutablePointer<CInt>) -> CInt {
    #if ENABLE_MOCKING
    let output = UnsafeMutableRawBufferPointer(start: count, count: MemoryLayout<CInt>.size)
    if let value = mocked("ioctl", [Int(fd), Int(TIOCOUTQ)], output: output) { return value < 0 ? -1 : 0 }
    #endif
    return ioctl(fd, UInt(TIOCOUTQ), count)
}
