import Synchronization
import Testing

@testable import LinuxIO

/// The VM test's hang after the jump (docs/vm-test.md): the scan's task was cancelled (its consumer had found the
/// device) at the moment it re-armed its wait in the reactor. The reactor held its lock and bypassed the syscall mock
/// by binding a task-local, which waits for the task's status lock; the cancelling thread held that lock while it ran
/// the task's cancellation handlers, and the reactor's handler waited for the reactor's lock. Both threads of the
/// cooperative pool stopped for good (one in `futex_lock_pi`, one in a futex wait), the update's watchdog with them.
/// The bypass must not wait for the task's status lock.
@Suite(.timeLimit(.minutes(1))) struct MockBypassTests {
    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    @Test func bypassingTheMockDoesNotWaitForTheTaskStatusLock() async throws {
        let inside = Flag()
        let handlerRunning = Flag()
        let bypassed = Flag()
        let took = Mutex<Duration?>(nil)
        let task = Task {
            await withTaskCancellationHandler {
                inside.set()
                // Until the canceller runs our handler (and so holds this task's status lock), at most 10 s.
                let limit = ContinuousClock.now.advanced(by: .seconds(10))
                while !handlerRunning.isSet && ContinuousClock.now < limit {}
                let start = ContinuousClock.now
                let answer = SyscallMock.bypass { 42 }
                took.withLock { $0 = start.duration(to: .now) }
                bypassed.set()
                #expect(answer == 42)
            } onCancel: {
                handlerRunning.set()
                // Holds the status lock until the task's bypass returned, or 3 s (the bypass of the hang waited here).
                let limit = ContinuousClock.now.advanced(by: .seconds(3))
                while !bypassed.isSet && ContinuousClock.now < limit {}
            }
        }
        for _ in 0..<5000 where !inside.isSet { try await Task.sleep(for: .milliseconds(2)) }
        try #require(inside.isSet)
        task.cancel()  // runs the handler here, holding the task's status lock
        await task.value
        #expect(handlerRunning.isSet)
        let waited = try #require(took.withLock { $0 })
        #expect(waited < .seconds(1), "the bypass waited \(waited) for the cancelling thread")
        #expect(bypassed.isSet)
    }

    @Test func insideABypassTheMockDoesNotAnswer() throws {
        let mock = SyscallMock(script: [])
        mock.run {
            #expect(!SyscallMock.isBypassed)
            SyscallMock.bypass {
                #expect(SyscallMock.isBypassed)
                // A syscall the mock would answer (and record as unexpected) reaches the kernel instead.
                #expect(mocked("close", [-1]) == nil)
            }
            #expect(!SyscallMock.isBypassed)
        }
        #expect(mock.calls.isEmpty)
    }
}
