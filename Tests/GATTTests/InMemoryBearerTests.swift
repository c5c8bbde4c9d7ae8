import BLECore
import GATT
import TestDoubles
import Testing

@Suite(.timeLimit(.minutes(3))) struct InMemoryBearerTests {
    @Test func preservesMessageBoundariesAndOrder() async throws {
        let (a, b) = InMemoryBearer.makePair()
        try await a.send([1, 2, 3])
        try await a.send([])
        try await a.send([4])
        #expect(try await b.receive() == [1, 2, 3])
        #expect(try await b.receive() == [])
        #expect(try await b.receive() == [4])
    }

    @Test func sendSuspendsWhileTheQueueIsFull() async throws {
        let (a, b) = InMemoryBearer.makePair(capacity: 1)
        try await a.send([1])
        let blocked = Task { try await a.send([2]) }
        #expect(try await b.receive() == [1])  // frees the slot, the blocked send completes
        try await blocked.value
        #expect(try await b.receive() == [2])
    }

    @Test func closeDrainsThenDisconnects() async throws {
        let (a, b) = InMemoryBearer.makePair()
        try await a.send([9])
        await a.close()
        #expect(try await b.receive() == [9])
        await #expect(throws: BearerError(.disconnected)) { try await b.receive() }
        await #expect(throws: BearerError(.disconnected)) { try await b.send([1]) }
        await #expect(throws: BearerError(.closed)) { try await a.receive() }
        await #expect(throws: BearerError(.closed)) { try await a.send([1]) }
    }

    @Test func closeWakesAPendingReceive() async throws {
        let (a, b) = InMemoryBearer.makePair()
        let pending = Task { try await b.receive() }
        await Task.yield()
        await a.close()
        await #expect(throws: BearerError(.disconnected)) { try await pending.value }
    }

    @Test func rejectsPDUsLargerThanTheLink() async throws {
        let (a, _) = InMemoryBearer.makePair(maximumPDUSize: 23)
        await #expect(throws: BearerError(.pduTooLarge)) { try await a.send(Array(repeating: 0, count: 24)) }
    }

    @Test func manualClockWakesSleepersInOrderOnlyWhenDue() async throws {
        let clock = ManualClock()
        let sleeper = Task { () async throws -> ManualClock.Instant in
            try await clock.sleep(for: .seconds(5))
            return clock.now
        }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(4))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        #expect(try await sleeper.value == ManualClock.Instant(offset: .seconds(5)))
        let cancelled = Task { try await clock.sleep(for: .seconds(1)) }
        await clock.waitForSleepers(1)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(clock.sleeperCount == 0)
    }
}
