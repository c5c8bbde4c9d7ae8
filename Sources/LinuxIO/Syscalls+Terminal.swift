import CLinuxShim
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Terminals

/// ioctl(fd, TIOCGWINSZ, &size): the terminal's rows and columns (`struct winsize`, declared in the C shim as
/// `bledfu_winsize`). Under a mock, a `.bytes` step supplies the struct (8 bytes: rows, columns, x and y pixels,
/// little-endian 16-bit).
@inline(never)
public func system_ioctlWindowSize(_ fd: CInt, _ size: UnsafeMutablePointer<bledfu_winsize>) -> CInt {
    #if ENABLE_MOCKING
    let output = UnsafeMutableRawBufferPointer(start: size, count: MemoryLayout<bledfu_winsize>.size)
    if let value = mocked("ioctl", [Int(fd), Int(BLEDFU_TIOCGWINSZ)], output: output) { return value < 0 ? -1 : 0 }
    #endif
    return ioctl(fd, UInt(BLEDFU_TIOCGWINSZ), size)
}

/// A terminal's size in character cells.
public struct TerminalSize: Sendable, Hashable {
    public var columns: Int
    public var rows: Int

    public init(columns: Int, rows: Int) {
        self.columns = columns
        self.rows = rows
    }

    /// The size of the terminal `fd` is (TIOCGWINSZ), or nil when it is no terminal or reports 0 columns (a
    /// pseudo-terminal nobody sized).
    public static func of(fd: CInt) -> TerminalSize? {
        var size = bledfu_winsize()
        guard system_ioctlWindowSize(fd, &size) == 0, size.ws_col > 0 else { return nil }
        return TerminalSize(columns: Int(size.ws_col), rows: Int(size.ws_row))
    }
}
