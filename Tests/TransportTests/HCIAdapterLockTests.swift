import BlueZTransport
import Foundation
import GATT
import LinuxIO
import Synchronization
import SystemPackage
import TestDoubles
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The per-adapter lock that keeps the raw HCI scans of one bledfu process apart from the connects of others
/// (issue 21 point 2): at the syscall boundary (LinuxIO's mock, time on a manual clock) and across real processes
/// (util-linux `flock` holding the same file).
@Suite("Cross-process HCI coordination", .timeLimit(.minutes(3)))
struct HCIAdapterLockTests {
    static func directory() throws -> String {
        let url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("bledfu-hcilock-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    #if ENABLE_MOCKING
    @Test("A connect waits (on the injected clock) while another process scans, then runs holding the lock shared")
    func sharedWaitsForExclusive() async throws {
        let clock = ManualClock()
        let lock = HCIAdapterLock(adapter: "hci0", directory: "/nonexistent")
        let mock = SyscallMock(script: [
            .returns("open", 77), .fails("flock", .wouldBlock), .fails("flock", .wouldBlock), .returns("flock", 0),
            .returns("flock", 0), .returns("close", 0),
        ])
        let task = Task {
            await mock.run {
                await lock.withLock(.shared, timeout: .seconds(10), clock: clock) { acquired in acquired }
            }
        }
        for _ in 0..<2 {
            await clock.waitForSleepers(1)
            clock.advance(by: HCIAdapterLock.retryInterval)
        }
        #expect(await task.value == true)
        #expect(mock.violations.isEmpty, "\(mock.violations)")
        let flocks = mock.calls.filter { $0.name == "flock" }.map { $0.arguments[1] }
        #expect(flocks == [Int(LOCK_SH | LOCK_NB), Int(LOCK_SH | LOCK_NB), Int(LOCK_SH | LOCK_NB), Int(LOCK_UN)])
        #expect(mock.calls.first?.arguments.first == Int(O_RDONLY | O_CREAT | O_CLOEXEC))
    }

    @Test("A scan that cannot have the adapter within its wait goes on without the lock (bounded: never waits forever)")
    func exclusiveGivesUpAtTheDeadline() async throws {
        let clock = ManualClock()
        let lock = HCIAdapterLock(adapter: "hci0", directory: "/nonexistent")
        let full = SyscallMock(
            script: [.returns("open", 78)] + Array(repeating: .fails("flock", .wouldBlock), count: 6) + [.returns("close", 0)])
        let task = Task {
            await full.run {
                await lock.withLock(.exclusive, timeout: .milliseconds(100), clock: clock) { acquired in acquired }
            }
        }
        for _ in 0..<5 {
            await clock.waitForSleepers(1)
            clock.advance(by: HCIAdapterLock.retryInterval)
        }
        #expect(await task.value == false)
        #expect(full.violations.isEmpty, "\(full.violations)")
        #expect(full.callNames.last == "close")
        #expect(full.calls.filter { $0.name == "flock" }.allSatisfy { $0.arguments[1] == Int(LOCK_EX | LOCK_NB) })
    }
    #endif

    /// `flock MODE FILE cat`: holds the lock until its standard input ends; says "held" first.
    static func holder(_ mode: String, _ path: String) async throws -> (ChildProcess, CInt) {
        let input = try ChildProcess.makePipe()
        let output = try ChildProcess.makePipe()
        let child = try ChildProcess.spawn(
            "/usr/bin/flock", arguments: [mode, path, "/bin/sh", "-c", "echo held; exec cat > /dev/null"],
            standardInput: .descriptor(input.read), standardOutput: .descriptor(output.write))
        _ = system_close(input.read)
        _ = system_close(output.write)
        let reader = try PipeReader(fd: output.read)
        defer { reader.close() }
        let said = try await reader.read(timeout: .seconds(60))
        #expect(String(decoding: said, as: UTF8.self) == "held\n")
        return (child, input.write)
    }

    @Test("Several processes: a scan's exclusive lock in another process holds our connect until it ends")
    func anotherProcessesScanHoldsTheConnect() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let lock = HCIAdapterLock(adapter: "hci7", directory: directory)
        let (scanner, release) = try await Self.holder("-x", lock.path)
        let released = ManagedFlag()
        let connect = Task {
            await lock.withLock(.shared, timeout: .seconds(120)) { acquired -> Bool in
                // The other process must be gone by now: its lock ended with it.
                acquired && released.value && scanner.exit != nil
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        released.value = true
        _ = system_close(release)  // the holder's cat sees end of file, the holder exits, its lock ends
        #expect(await scanner.wait(timeout: .seconds(60)) == .exited(0))
        #expect(await connect.value == true)
    }

    @Test("Several processes: connects share the adapter; a scan does not run beside them")
    func connectsShareAScanWaits() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let lock = HCIAdapterLock(adapter: "hci7", directory: directory)
        let (other, release) = try await Self.holder("-s", lock.path)
        #expect(await lock.withLock(.shared, timeout: .seconds(60)) { $0 } == true)
        #expect(await lock.withLock(.exclusive, timeout: .milliseconds(200)) { $0 } == false)
        _ = system_close(release)
        #expect(await other.wait(timeout: .seconds(60)) == .exited(0))
        #expect(await lock.withLock(.exclusive, timeout: .seconds(60)) { $0 } == true)
    }

    @Test("The lock directory: /run/bledfu when usable, else XDG_RUNTIME_DIR/bledfu")
    func directoryChoice() throws {
        let runtime = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let chosen = HCIAdapterLock.defaultDirectory(environment: ["XDG_RUNTIME_DIR": runtime])
        // As root /run/bledfu is usable; as another user it is not and the runtime directory is taken.
        #expect(chosen == (getuid() == 0 ? "/run/bledfu" : "\(runtime)/bledfu"))
    }
}

/// A flag set by the test and read by a task.
final class ManagedFlag: Sendable {
    private let stored = Mutex(false)
    var value: Bool {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
