import BLECore
import DFUCore
import Synchronization
import TestDoubles
import Testing

@testable import BledfuKit

/// The updater's own watchdog (issue 21 point 5): an update that waits on something that never answers, and does
/// not even end when cancelled (a lost wake-up), still ends: with ``DFUError/Code/stalled``, naming the last step.
@Suite(.timeLimit(.minutes(2))) struct StallWatchdogTests {
    /// An adapter whose connect never returns, cancelled or not.
    struct HangingAdapter: BLEAdapter {
        let ignoresCancellation: Bool
        /// Set once the flow is inside connect (after its "connecting" event).
        let entered = Entered()
        final class Entered: Sendable {
            private let value = Mutex(false)
            func set() { value.withLock { $0 = true } }
            var isSet: Bool { value.withLock { $0 } }
        }
        var name: String { "hanging" }
        func scan(filter: ScanFilter, duration: Duration) -> AsyncThrowingStream<Advertisement, any Error> {
            AsyncThrowingStream { $0.finish() }
        }
        func connect(to peer: PeerAddress, options: ConnectOptions) async throws(AdapterError) -> any ATTBearer {
            entered.set()
            if ignoresCancellation {
                await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }  // never resumed
            } else {
                try? await Task.sleep(for: .seconds(3600))
            }
            throw AdapterError(.connectionTimeout, "cancelled")
        }
    }

    static func run(ignoringCancellation: Bool) async throws -> (DFUError?, [UpdateEvent]) {
        let watchdog = ManualClock()
        let adapter = HangingAdapter(ignoresCancellation: ignoringCancellation)
        let updater = Updater(adapter: adapter, clock: ManualClock(), watchdogClock: watchdog)
        var request = KitFixture.request(try KitFixture.package())
        request.stallLimit = .seconds(120)
        let run = updater.start(request)
        // The watchdog sleeps its limit; nothing happens after "connecting": the limit passes. (Advanced only once
        // the flow is inside connect, so that "connecting" is the last event; before, it could still be "starting".)
        for _ in 0..<10_000 where !adapter.entered.isSet { try await Task.sleep(for: .milliseconds(1)) }
        #expect(adapter.entered.isSet)
        await watchdog.waitForSleepers(1)
        watchdog.advance(by: .seconds(120))
        if ignoringCancellation {
            // The flow did not end when cancelled: the run ends after the grace anyway.
            await watchdog.waitForSleepers(1)
            watchdog.advance(by: StallGuard.grace)
        }
        var events: [UpdateEvent] = []
        for await event in run { events.append(event) }
        do {
            _ = try await run.result()
            return (nil, events)
        } catch {
            return (error, events)
        }
    }

    @Test func aFlowThatNeverAnswersEndsStalledNamingItsLastStep() async throws {
        let (error, events) = try await Self.run(ignoringCancellation: true)
        #expect(error?.code == .stalled)
        #expect(error?.message.contains("nothing happened for 120 s") == true, "\(String(describing: error))")
        #expect(error?.message.contains("connecting") == true, "\(String(describing: error))")
        #expect(events.contains(.connecting(address: KitFixture.address.description)))
    }

    @Test func aCancelledFlowEndsStalledNotCancelled() async throws {
        let (error, _) = try await Self.run(ignoringCancellation: false)
        #expect(error?.code == .stalled)
    }

    @Test func eventsKeepTheWatchdogQuiet() async throws {
        let clock = ManualClock()
        let watchdog = StallGuard(limit: .seconds(120), clock: clock)
        let waiting = Task { await watchdog.waitForStall() }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(100))
        watchdog.touch(.connecting(address: "A"))  // at 100 s: quiet until 220 s
        clock.advance(by: .seconds(20))  // 120 s since the start, 20 s since the event
        await clock.waitForSleepers(1)
        #expect(!watchdog.fired)
        clock.advance(by: .seconds(100))  // 220 s: 120 s since the event
        #expect(await waiting.value?.contains("connecting") == true)
        #expect(watchdog.fired)
    }
}
