#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import BLECore
import Foundation
import LinuxIO
import SystemPackage

/// Coordinates the raw HCI work of several bledfu processes on one adapter (issue 21 point 2; `batch` runs each
/// device in a `bledfu flash` of its own, all on the same adapter).
///
/// The kernel queues LE connection attempts per adapter for every process, so connects need no lock among
/// themselves; but a raw scan (LE Set Scan Enable sent by bledfu itself) stops as soon as any process connects (the
/// kernel disables any scan it sees enabled before it creates a connection, many-links.md §2.2), and a connect
/// started while a scan is being disabled makes the kernel give up on it ("Unable to disable scanning"). So a scan
/// holds the adapter's lock exclusively for its whole run, and a connect holds it shared while the kernel creates the
/// link: connects run side by side, never beside a scan. ``ScanActivity`` does the same inside one process.
///
/// The lock is an flock(2) on `<directory>/<adapter>.lock` (the kernel frees it with the process, even after kill
/// -9); the directory is `/run/bledfu` when it can be used, else `$XDG_RUNTIME_DIR/bledfu`, else `/tmp/bledfu-<uid>`.
/// Processes of different users without a common directory are not coordinated. flock cannot be awaited: a wait
/// retries every ``retryInterval`` on the injected clock until its deadline, then goes on without the lock (the
/// kernel's own queue still holds; the worst case is the race this lock narrows).
public struct HCIAdapterLock: Sendable {
    public enum Mode: Sendable {
        /// A raw scan: alone on the adapter.
        case exclusive
        /// A connect: beside other connects, never beside a scan.
        case shared
    }

    public let path: String
    public static let retryInterval: Duration = .milliseconds(20)
    /// How long a scan waits for the connects of other processes to be created before it scans anyway.
    public static let scanWait: Duration = .seconds(10)

    public init(adapter: String, directory: String = HCIAdapterLock.defaultDirectory()) {
        path = "\(directory)/\(adapter).lock"
    }

    /// The directory of the lock files (created when missing).
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        var candidates = ["/run/bledfu"]
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { candidates.append("\(runtime)/bledfu") }
        candidates.append("/tmp/bledfu-\(getuid())")
        for candidate in candidates {
            // Usable: it exists (or can be made) and this process can create its lock files there.
            guard (try? FileIO.makeDirectory(candidate, mode: 0o755)) != nil,
                case .success(let fd) = valueOrErrno({ system_open("\(candidate)/.lock", O_RDONLY | O_CREAT | O_CLOEXEC, 0o644) })
            else { continue }
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) }
            return candidate
        }
        return candidates.last ?? "/tmp"
    }

    /// Runs `body` holding the lock in `mode`, waiting at most `timeout` for it (on `clock`); without the lock
    /// when it cannot be had in time or the file cannot be opened (`acquired` false then).
    public func withLock<T: Sendable, E: Error>(
        _ mode: Mode, timeout: Duration, clock: some Clock<Duration> = ContinuousClock(),
        _ body: (_ acquired: Bool) async throws(E) -> T
    ) async throws(E) -> T {
        let held = await acquire(mode, timeout: timeout, clock: clock)
        defer { held?.release() }
        return try await body(held != nil)
    }

    /// A lock held until ``release()``.
    final class Held: Sendable {
        private let fd: CInt
        init(fd: CInt) { self.fd = fd }
        func release() {
            _ = valueOrErrno { system_flock(fd, LOCK_UN) }
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) }
        }
    }

    func acquire(_ mode: Mode, timeout: Duration, clock: some Clock<Duration>) async -> Held? {
        // Read-only is enough for flock, so a lock file another user created can be shared.
        guard case .success(let fd) = valueOrErrno({ system_open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644) }) else {
            return nil
        }
        let operation = (mode == .exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB
        let deadline = clock.now.advanced(by: timeout)
        while true {
            switch valueOrErrno({ system_flock(fd, operation) }) {
            case .success: return Held(fd: fd)
            case .failure(let error) where error == .wouldBlock && clock.now < deadline:
                do {
                    try await clock.sleep(for: Self.retryInterval)
                } catch {
                    break  // cancelled: go on without the lock
                }
                continue
            case .failure:
                break
            }
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(fd) }
            return nil
        }
    }
}
