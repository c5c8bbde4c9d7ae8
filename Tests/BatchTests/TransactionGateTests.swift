import Batch
import TestDoubles
import Testing

/// The gate that serializes a process's database transactions: FIFO, and a wait with a deadline (a transaction that
/// holds the gate because its server stopped answering fails the ones behind it with one line, never holds them
/// forever). Time runs on a manual clock.
@Suite(.timeLimit(.minutes(3))) struct TransactionGateTests {
    @Test func waitersEnterInOrderWhenTheHolderLeaves() async throws {
        let gate = TransactionGate(limit: .seconds(120), clock: ManualClock())
        try await gate.enter()
        let second = Task { try await gate.enter() }
        for _ in 0..<10_000 where await gate.waitingCount < 1 { await Task.yield() }
        #expect(await gate.waitingCount == 1)
        await gate.leave()
        try await second.value
        #expect(await gate.waitingCount == 0)
        await gate.leave()
        try await gate.enter()  // free again
    }

    @Test func aHolderThatNeverLeavesFailsTheNextAtTheDeadline() async throws {
        let clock = ManualClock()
        let gate = TransactionGate(limit: .seconds(120), clock: clock)
        try await gate.enter()  // and never leaves
        let second = Task { () async -> BatchLogError? in
            do throws(BatchLogError) {
                try await gate.enter()
                return nil
            } catch {
                return error
            }
        }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(119))
        #expect(await gate.waitingCount == 1)
        clock.advance(by: .seconds(1))
        guard let error = await second.value else {
            Issue.record("entered a gate its holder never left")
            return
        }
        #expect(error.code == .write)
        #expect(error.reason == "the database did not finish the previous transaction within 120 s")
        #expect(await gate.waitingCount == 0)
        // The timed-out waiter never holds the gate: the holder's leave frees it for the next.
        await gate.leave()
        try await gate.enter()
    }
}
