#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SystemPackage

// Linux abstract AF_UNIX names (unix(7): `sun_path[0]` is NUL; the name is the bytes after it, up to the address
// length, and lives as long as the socket, with no file). The virtual radio's centrals name themselves so (their
// adapter: docs/virtual-radio.md §4.2), and a device learns the name from accept(2).

extension SocketDescriptor {
    /// bind(2) to the abstract name `name` (at most 107 bytes).
    public func bind(abstractName name: String) throws(Errno) {
        let bytes = Array(name.utf8)
        guard bytes.count <= SocketDescriptor.maximumUnixPathLength else { throw .fileNameTooLong }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index + 1] = byte }
        }
        let length = MemoryLayout<sa_family_t>.size + 1 + bytes.count
        try withUnsafeBytes(of: &address) { (raw) throws(Errno) in
            try bind(address: UnsafeRawBufferPointer(rebasing: raw[0..<length]))
        }
    }

    /// accept(2) that also returns the peer's name: its abstract name (without the leading NUL), its path, or nil
    /// for an unnamed socket. The new descriptor is made non-blocking and close-on-exec.
    public func acceptNamed() throws(Errno) -> IOResult<(SocketDescriptor, String?)> {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutableBytes(of: &address) { raw in
            ioResultOrErrno { system_accept(rawValue, raw.baseAddress?.assumingMemoryBound(to: sockaddr.self), &length) }
        }
        switch try result.get() {
        case .wouldBlock: return .wouldBlock
        case .processed(let fd):
            let accepted = SocketDescriptor(rawValue: fd)
            do throws(Errno) {
                try SocketDescriptor.setNonBlockingCloseOnExec(fd)
            } catch {
                try? accepted.close()  // already failing with `error`
                throw error
            }
            return .processed((accepted, SocketDescriptor.name(of: address, length: Int(length))))
        }
    }

    /// The name in a `sockaddr_un` of `length` bytes (as accept(2) or getpeername(2) filled it).
    static func name(of address: sockaddr_un, length: Int) -> String? {
        let pathLength = length - MemoryLayout<sa_family_t>.size
        guard pathLength > 0 else { return nil }
        return withUnsafeBytes(of: address.sun_path) { raw -> String? in
            let bytes = Array(raw.prefix(min(pathLength, raw.count)))
            guard let first = bytes.first else { return nil }
            if first == 0 { return String(decoding: bytes.dropFirst(), as: UTF8.self) }
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
