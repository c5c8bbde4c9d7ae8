import CLinuxShim
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// MARK: - Messages

/// sendmmsg(2): sends `count` messages described by the `mmsghdr` array at `headers`; returns how many were sent
/// (each header's `msg_len` is set to its byte count). Under a mock the step's value is the message count and the
/// input is the first message's bytes. A GNU extension: declared in CLinuxShim (`bledfu_sendmmsg`).
@inline(never)
public func system_sendmmsg(
    _ fd: CInt, _ headers: UnsafeMutablePointer<bledfu_mmsghdr>, _ count: CUnsignedInt, _ flags: CInt
) -> CInt {
    #if ENABLE_MOCKING
    if SyscallMock.current != nil {
        let first = count > 0 ? MessageHeaders.firstIOVector(headers) : nil
        if let value = mocked("sendmmsg", [Int(fd), Int(count), Int(flags)], input: first) { return CInt(value) }
    }
    #endif
    return bledfu_sendmmsg(fd, headers, count, flags)
}

/// recvmmsg(2) without a timeout: receives up to `count` messages into the `mmsghdr` array at `headers`; returns how
/// many arrived (each header's `msg_len` and `msg_hdr.msg_flags` are set). Under a mock a step answers one message:
/// `.bytes` fills the first buffer and sets its `msg_len`, `.returns(n)` is one message of n bytes, `.fails` the
/// errno. A GNU extension: declared in CLinuxShim (`bledfu_recvmmsg`).
@inline(never)
public func system_recvmmsg(
    _ fd: CInt, _ headers: UnsafeMutablePointer<bledfu_mmsghdr>, _ count: CUnsignedInt, _ flags: CInt
) -> CInt {
    #if ENABLE_MOCKING
    if SyscallMock.current != nil, count > 0 {
        let first = MessageHeaders.firstIOVector(headers)
        if let value = mocked(
            "recvmmsg", [Int(fd), Int(count), Int(flags)],
            output: UnsafeMutableRawBufferPointer(mutating: first))
        {
            guard value >= 0 else { return -1 }
            MessageHeaders.setReceived(headers, index: 0, length: value, flags: 0)
            return 1
        }
    }
    #endif
    return bledfu_recvmmsg(fd, headers, count, flags)
}
