import BLECore
import Foundation
import LinuxIO
import Synchronization
import SystemPackage
import VirtualRadio

/// The running `bledfu flash` children of one batch. Each runs in a process group of its own (the terminal's Ctrl-C
/// reaches the batch alone), so the batch passes Ctrl-C on through here: the first one asks every child to stop at
/// its next safe point (SIGINT: `bledfu flash` stops there and keeps its journal), the second one kills them.
public final class FlashChildren: Sendable {
    public init() {}

    private struct State {
        var running: [pid_t: ChildProcess] = [:]
        var interrupted = false
    }

    private let state = Mutex(State())

    /// Registers a child just started; one started after ``interrupt()`` gets SIGINT at once.
    public func add(_ child: ChildProcess) {
        let interrupted = state.withLock { state -> Bool in
            state.running[child.pid] = child
            return state.interrupted
        }
        if interrupted { child.signal(SIGINT) }
    }

    public func remove(_ child: ChildProcess) {
        _ = state.withLock { $0.running.removeValue(forKey: child.pid) }
    }

    /// SIGINT to every running child (and to any started later); returns how many got it.
    @discardableResult
    public func interrupt() -> Int {
        let children = state.withLock { state -> [ChildProcess] in
            state.interrupted = true
            return Array(state.running.values)
        }
        for child in children { child.signal(SIGINT) }
        return children.count
    }

    /// SIGKILL to every running child (a second Ctrl-C): they end at once, their journals stay as last written.
    public func kill() {
        for child in state.withLock({ Array($0.running.values) }) { child.signal(SIGKILL) }
    }

    public var count: Int { state.withLock { $0.running.count } }
}

extension ProcessFlasher {
    /// After a child's output ends, how long it gets to exit before it is killed.
    public static let exitGrace: Duration = .seconds(10)

    public func adapterPresent(_ adapter: BatchPlan.Adapter) async -> Bool { Self.adapterPresent(name: adapter.name) }

    /// Whether an adapter still exists: a virtual radio's directory; a kernel adapter's `/sys/class/bluetooth/hciN`
    /// (gone once the kernel unregistered it: USB pulled, HCI_DEV_UNREG). True when it cannot tell (`any`, an address).
    public static func adapterPresent(name: String) -> Bool {
        if name.hasPrefix("virtual:"), let radio = VirtualRadio.parse(String(name.dropFirst("virtual:".count))) {
            return FileManager.default.fileExists(atPath: radio.directory)
        }
        let sysfs = "/sys/class/bluetooth"
        if name.hasPrefix("hci"), Int(name.dropFirst(3)) != nil, FileManager.default.fileExists(atPath: sysfs) {
            return FileManager.default.fileExists(atPath: "\(sysfs)/\(name)")
        }
        return true
    }

    public func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
        let arguments = arguments(job)
        let log = DeviceLog(directory: logDirectory, address: job.target.address.description)
        log.write("--- attempt \(job.attempt): bledfu \(arguments.joined(separator: " "))\n")
        defer { log.close() }
        let child: ChildProcess
        let reader: PipeReader
        do throws(ChildProcessError) {
            (child, reader) = try start(arguments, log: log)
        } catch {
            return FlashOutcome(success: false, error: error.message, retryable: false)
        }
        children.add(child)
        defer { children.remove(child) }
        let stallLimit = job.options.effectiveStallTimeout
        let watchdog = StallWatchdog(limit: .milliseconds(Int64(stallLimit * 1000)), clock: ContinuousClock()) {
            // The child ends (also a stopped one), its standard output reaches EOF and the read below ends.
            child.signal(SIGKILL)
        }
        let started = ContinuousClock.now
        let parser = FlashEventParser(total: job.package.totalBytes, progress: progress) { line in
            // Everything but the progress events goes to the device's log too, with the time since the start.
            let elapsed = started.duration(to: .now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            log.write(String(format: "%8.3f ", seconds) + String(decoding: line, as: UTF8.self) + "\n")
        }
        // The watchdog kills a silent child; the read's own deadline (twice the limit) is the backstop should the
        // output stay open after the kill (a grandchild holding it).
        // Cancelled (another station took the device over): the child is killed, its output ends and it is reaped
        // below, so nothing outlives this call.
        let ended = await withTaskCancellationHandler {
            await Self.readEvents(reader, parser: parser, backstop: .milliseconds(Int64(stallLimit * 2000))) {
                watchdog.touch()
            }
        } onCancel: {
            child.signal(SIGKILL)
        }
        reader.close()
        let stalled = watchdog.stop() || ended == .backstop
        if ended == .backstop { child.signal(SIGKILL) }
        // After the end of its output: a bounded wait for the exit, then SIGKILL and reap.
        var exit = await child.wait(timeout: Self.exitGrace)
        let lingered = exit == nil
        if lingered { exit = await child.end(grace: .zero) }
        if stalled {
            log.write("--- killed: no event for \(Int(stallLimit)) s\n")
            return FlashOutcome(
                success: false,
                error: "bledfu flash stopped answering (no event for \(Int(stallLimit)) s) and was killed "
                    + "[exit \(BatchExit.flashStalled)]",
                exitCode: BatchExit.flashStalled, retryable: true)
        }
        guard let exit, !lingered else {
            let after = exit == nil ? "did not exit even after SIGKILL" : "was killed"
            log.write("--- its output ended but it did not exit within \(Self.exitGrace): \(after)\n")
            return FlashOutcome(
                success: false,
                error: "bledfu flash (pid \(child.pid)) closed its output but did not exit within \(Self.exitGrace.components.seconds) s "
                    + "and \(after) [exit \(BatchExit.flashStalled)]",
                exitCode: BatchExit.flashStalled, retryable: true)
        }
        return parser.outcome(exitStatus: exit.code, logPath: log.path)
    }

    /// Starts one `bledfu flash`: standard input /dev/null, standard output a pipe read here, standard error the log.
    private func start(_ arguments: [String], log: DeviceLog) throws(ChildProcessError) -> (ChildProcess, PipeReader) {
        let pipe: (read: CInt, write: CInt)
        do throws(Errno) {
            pipe = try ChildProcess.makePipe()
        } catch {
            throw ChildProcessError(.descriptor, "cannot start \(executable.path): pipe2: \(error)", errno: error)
        }
        let child: ChildProcess
        do throws(ChildProcessError) {
            child = try ChildProcess.spawn(
                executable.path, arguments: arguments, standardInput: .null, standardOutput: .descriptor(pipe.write),
                standardError: log.fd.map { .descriptor($0) } ?? .null)
        } catch {
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.read) }
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.write) }
            throw error
        }
        // Only the child writes: its exit is the end of file.
        _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.write) }
        do throws(Errno) {
            return (child, try PipeReader(fd: pipe.read))
        } catch {
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.read) }
            child.signal(SIGKILL)
            throw ChildProcessError(.descriptor, "cannot read \(executable.path)'s output: fcntl: \(error)", errno: error)
        }
    }

    enum OutputEnd: Equatable {
        /// End of file: the child closed its output (it exited, or was killed).
        case endOfFile
        /// No byte for the backstop's time.
        case backstop
        /// A read failed (the exit status still decides).
        case failed
    }

    /// Reads the child's events line by line until end of file; `alive` runs on every chunk.
    static func readEvents(
        _ reader: PipeReader, parser: FlashEventParser, backstop: Duration, alive: () -> Void
    ) async -> OutputEnd {
        var buffer: [UInt8] = []
        while true {
            let chunk: [UInt8]
            do throws(Errno) {
                chunk = try await reader.read(timeout: backstop)
            } catch {
                return error == .timedOut ? .backstop : .failed
            }
            if chunk.isEmpty { return .endOfFile }
            alive()
            buffer += chunk
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                parser.consume(Data(buffer[buffer.startIndex..<newline]))
                buffer.removeSubrange(buffer.startIndex...newline)
            }
        }
    }
}

/// One device's log file (`<directory>/<address>.log`, appended to): the child's standard error and the batch's notes.
/// Diagnostics only: a log that cannot be opened or written loses nothing the database needs.
struct DeviceLog: Sendable {
    let path: String
    let fd: CInt?

    init(directory: URL, address: String) {
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent(address.replacingOccurrences(of: ":", with: "-") + ".log").path
        let path = self.path
        switch valueOrErrno({ system_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644) }) {
        case .success(let fd): self.fd = fd
        case .failure: fd = nil
        }
    }

    func write(_ text: String) {
        guard let fd else { return }
        try? FileIO.writeAll(fd, Array(text.utf8))
    }

    func close() {
        guard let fd else { return }
        try? FileIO.close(fd)
    }
}
