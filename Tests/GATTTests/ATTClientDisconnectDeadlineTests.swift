import ATT
import BLECore
import TestDoubles
import Testing

@testable import GATT

/// A wait for the peer to drop the link has a deadline of its own (issue 21: no `bledfu flash` waits forever): a
/// device that stays connected after a buttonless jump, with no transaction outstanding, would otherwise hold the
/// wait for good. Time runs on a manual clock.
@Suite(.timeLimit(.minutes(3))) struct ATTClientDisconnectDeadlineTests {
    let clock = ManualClock()
    let client: ATTClient
    let peer: InMemoryBearer

    init() {
        let (clientEnd, peerEnd) = InMemoryBearer.makePair()
        client = ATTClient(bearer: clientEnd, clock: clock)
        peer = peerEnd
    }

    @Test func aPeerThatNeverDisconnectsEndsTheWaitAtItsDeadline() async throws {
        let client = self.client
        let wait = Task { await client.disconnected(within: .seconds(10)) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(9))
        await clock.waitForSleepers(1)  // still waiting at 9 s
        clock.advance(by: .seconds(1))
        #expect(await wait.value == nil)
        #expect(await client.closeReason == nil, "the deadline ends the wait, not the link")
    }

    @Test func aDisconnectBeforeTheDeadlineIsReported() async throws {
        let client = self.client
        let wait = Task { await client.disconnected(within: .seconds(10)) }
        await clock.waitForSleepers(1)
        await peer.close()
        #expect(await wait.value?.code == .disconnected)
    }

    @Test func cancellationEndsTheUnboundedWait() async throws {
        // `disconnected()` bounded by its caller (a task group with a deadline): cancelling it ends it.
        let client = self.client
        let wait = Task { await client.disconnected() }
        for _ in 0..<10_000 where await client.disconnectWaiterCount == 0 { await Task.yield() }
        wait.cancel()
        #expect(await wait.value.code == .closed)
    }
}
