#if ENABLE_MOCKING
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization
import SystemPackage

/// A scripted stand-in for the kernel, installed for one task tree with ``SyscallMock/run(_:)``.
///
/// Every wrapper in `Syscalls.swift` asks the installed mock first. The mock pops the next ``Step``:
/// the call name must match (a mismatch is recorded in ``violations`` and answered with ENOSYS), then the step's
/// outcome decides what the caller sees: a return value, a failure with an errno, bytes copied into the caller's
/// buffer (recv, read, getsockopt), or the real call. Calls beyond the script are passed through to the kernel
/// when `passthroughWhenExhausted` is true, otherwise they are violations. Every call is recorded in ``calls``.
///
/// Readiness waits (`SocketDescriptor.waitReadable()` / `waitWritable()`) complete at once under a mock and are
/// recorded as "waitReadable" / "waitWritable" calls (not script steps), so a script decides what the next
/// `recv`/`send` sees.
public final class SyscallMock: Sendable {
    /// One expected call and its answer.
    public struct Step: Sendable, CustomStringConvertible {
        public enum Outcome: Sendable {
            /// Return this value (for send/recv: a byte count; for socket/accept4: a descriptor).
            case returns(Int)
            /// Return -1 with this errno.
            case fails(Errno)
            /// Copy these bytes into the caller's output buffer and return their count.
            case bytes([UInt8])
            /// Make the real call.
            case passthrough
        }

        public var name: String
        public var outcome: Outcome

        public init(_ name: String, _ outcome: Outcome) {
            self.name = name
            self.outcome = outcome
        }

        public static func returns(_ name: String, _ value: Int = 0) -> Step { Step(name, .returns(value)) }
        public static func fails(_ name: String, _ errno: Errno) -> Step { Step(name, .fails(errno)) }
        public static func bytes(_ name: String, _ bytes: [UInt8]) -> Step { Step(name, .bytes(bytes)) }
        public static func passthrough(_ name: String) -> Step { Step(name, .passthrough) }

        public var description: String { "\(name) -> \(outcome)" }
    }

    /// A call the code under test made.
    public struct Call: Sendable, Hashable, CustomStringConvertible {
        public var name: String
        public var arguments: [Int]
        /// The bytes the caller passed in (send, write, setsockopt, bind, connect).
        public var input: [UInt8]?
        public var description: String { "\(name)(\(arguments.map(String.init).joined(separator: ", ")))" }
    }

    private struct State {
        var script: [Step]
        var next = 0
        var calls: [Call] = []
        var violations: [String] = []
    }

    private let state: Mutex<State>
    private let passthroughWhenExhausted: Bool

    public init(script: [Step], passthroughWhenExhausted: Bool = false) {
        self.state = Mutex(State(script: script))
        self.passthroughWhenExhausted = passthroughWhenExhausted
    }

    @TaskLocal public static var current: SyscallMock?

    /// Runs `body` with this mock answering the syscalls made by the current task and its child tasks.
    public func run<R, E: Error>(_ body: () async throws(E) -> R) async throws(E) -> R {
        let result: Result<R, E> = await SyscallMock.$current.withValue(self) {
            do throws(E) { return .success(try await body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Runs `body` (synchronous) with this mock installed.
    public func run<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = SyscallMock.$current.withValue(self) {
            do throws(E) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Runs `body` with no mock answering (for machinery that must reach the kernel, like the reactor's wake-up).
    ///
    /// A flag of the thread, not a task-local binding: binding a task-local (`$current.withValue(nil)`) first checks
    /// the current task's status records under that task's status lock, and the reactor bypasses the mock while it
    /// holds its own lock. A task cancelled at that moment had its cancellation handlers run, under the same status
    /// lock, by the cancelling thread, and the reactor's handler waits for the reactor's lock: each thread held what
    /// the other wanted. With both threads of the cooperative pool in it, nothing ran again (the VM test's hang after
    /// the jump: docs/vm-test.md; `MockBypassTests`). `body` is synchronous, so the thread is the task's for its
    /// whole run.
    static func bypass<R>(_ body: () -> R) -> R {
        let previous = pthread_getspecific(bypassKey)
        pthread_setspecific(bypassKey, UnsafeRawPointer(bitPattern: 1))
        defer { pthread_setspecific(bypassKey, previous) }
        return body()
    }

    /// Whether this thread runs a ``bypass(_:)`` body.
    static var isBypassed: Bool { pthread_getspecific(bypassKey) != nil }

    private static let bypassKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    public var calls: [Call] { state.withLock { $0.calls } }
    /// The names of the calls made, in order.
    public var callNames: [String] { calls.map(\.name) }
    /// Script mismatches and unexpected calls.
    public var violations: [String] { state.withLock { $0.violations } }
    /// Steps not consumed yet.
    public var remainingSteps: [Step] { state.withLock { Array($0.script[$0.next...]) } }

    /// Records a readiness wait (not a script step).
    func recordWait(_ name: String, fd: CInt) {
        state.withLock { $0.calls.append(Call(name: name, arguments: [Int(fd)], input: nil)) }
    }

    /// Answers one call; nil means "make the real call".
    func handle(
        _ name: String, arguments: [Int], input: UnsafeRawBufferPointer?, output: UnsafeMutableRawBufferPointer?
    ) -> Int? {
        let inputBytes = input.flatMap { $0.baseAddress == nil ? nil : Array($0) }
        let step: Step? = state.withLock { state in
            state.calls.append(Call(name: name, arguments: arguments, input: inputBytes))
            guard state.next < state.script.count else {
                if !passthroughWhenExhausted { state.violations.append("unexpected call \(name)") }
                return passthroughWhenExhausted ? Step(name, .passthrough) : nil
            }
            let step = state.script[state.next]
            state.next += 1
            if step.name != name {
                state.violations.append("expected \(step.name), got \(name)")
                return nil
            }
            return step
        }
        guard let step else {
            system_setErrno(.noFunction)
            return -1
        }
        switch step.outcome {
        case .returns(let value): return value
        case .fails(let error):
            system_setErrno(error)
            return -1
        case .bytes(let bytes):
            guard let output, let base = output.baseAddress else { return bytes.count }
            let count = min(bytes.count, output.count)
            bytes.withUnsafeBytes { source in
                if let from = source.baseAddress { base.copyMemory(from: from, byteCount: count) }
            }
            return count
        case .passthrough: return nil
        }
    }
}
#endif
