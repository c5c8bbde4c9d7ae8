import Foundation
import LinuxIO
import SystemPackage
import Synchronization

/// A `bledfu simulate --json` child of a batch bench run. Its standard output is a pipe: ``waitUntilReady(timeout:)``
/// reads its events until `ready` (printed once every device advertises), with a deadline; after that a task drains
/// the pipe until the child ends, so the simulator never blocks on a full pipe.
final class BenchSimulator: Sendable {
    let child: ChildProcess
    let reader: PipeReader
    private let drain = DrainTask()

    private init(child: ChildProcess, reader: PipeReader) {
        self.child = child
        self.reader = reader
    }

    /// Starts the simulator with its standard output on a pipe (standard input and error: /dev/null).
    static func start(executable: URL, arguments: [String], environment: [String: String]) throws(BenchError) -> BenchSimulator {
        let pipe: (read: CInt, write: CInt)
        do {
            pipe = try ChildProcess.makePipe()
        } catch {
            throw BenchError(.simulatorStart, "cannot start the simulator: \(error)", cause: error)
        }
        defer { _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.write) } }
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(
                executable.path, arguments: arguments, environment: environment, standardInput: .null,
                standardOutput: .descriptor(pipe.write), standardError: .null)
        } catch {
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.read) }
            throw BenchError(.simulatorStart, "cannot start the simulator: \(error.message)", cause: error)
        }
        do {
            return BenchSimulator(child: child, reader: try PipeReader(fd: pipe.read))
        } catch {
            _ = valueOrErrno(retryOnInterrupt: false) { system_close(pipe.read) }
            child.signal(SIGKILL)
            throw BenchError(.simulatorStart, "cannot read the simulator's output: \(error)", cause: error)
        }
    }

    /// Reads the simulator's events until its `ready` one; throws ``BenchError/Code/simulatorStopped`` when its
    /// output ends first (it exited) or `timeout` passes.
    func waitUntilReady(timeout: Duration) async throws(BenchError) {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        var pending: [UInt8] = []
        while true {
            let piece: [UInt8]
            do {
                piece = try await reader.read(timeout: max(.zero, ContinuousClock.now.duration(to: deadline)))
            } catch {
                let why = error == .timedOut ? "did not report its devices advertising within \(timeout)" : "\(error)"
                throw BenchError(.simulatorStopped, "the simulator \(why)", cause: error)
            }
            guard !piece.isEmpty else { throw BenchError(.simulatorStopped, "the simulator stopped") }
            pending += piece
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                if Self.isReady(line) {
                    drain.start(reader)
                    return
                }
            }
        }
    }

    /// Whether an NDJSON line is the simulator's `ready` event (docs/events.md).
    static func isReady(_ line: [UInt8]) -> Bool {
        struct Event: Decodable { var event: String }
        return (try? JSONDecoder().decode(Event.self, from: Data(line)))?.event == "ready"
    }

    /// Ctrl-C to the simulator, then a bounded wait (then SIGKILL: ChildProcess.end); then the pipe is closed.
    func stop() async {
        child.signal(SIGINT)
        _ = await child.end(grace: .seconds(10))
        await drain.finish()
        reader.close()
    }
}

/// The task that empties the simulator's pipe after `ready` (its later events are not read).
private final class DrainTask: Sendable {
    private let task = Mutex<Task<Void, Never>?>(nil)

    func start(_ reader: PipeReader) {
        let drain = Task {
            while let piece = try? await reader.read(timeout: nil), !piece.isEmpty {}
        }
        task.withLock { $0 = drain }
    }

    /// Cancels the drain (its read ends with ECANCELED) and waits for it.
    func finish() async {
        guard let running = task.withLock({ value in defer { value = nil }; return value }) else { return }
        running.cancel()
        await running.value
    }
}
