import BLECore
import TestDoubles
import Testing

@testable import DFUCore

@Suite(.timeLimit(.minutes(2))) struct SeamSupportTests {
    /// The erased clock sleeps on the wrapped clock: a manual clock's advance wakes it, nothing else does.
    @Test func updateClockSleepsOnTheWrappedClock() async throws {
        let manual = ManualClock()
        let clock = UpdateClock(manual)
        let sleeper = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(5)), tolerance: nil) }
        await manual.waitForSleepers(1)
        #expect(clock.now.offset == .zero)
        manual.advance(by: .seconds(5))
        try await sleeper.value
        #expect(clock.now.offset == .seconds(5))
    }

    @Test func stopSignalWakesWaitersAndHandlers() async {
        let signal = StopSignal()
        let (calls, continuation) = AsyncStream.makeStream(of: Int.self)
        let registration = signal.onRequest { continuation.yield(1) }
        let removed = signal.onRequest { continuation.yield(2) }
        removed.cancel()
        let waiter = Task { await signal.requested() }
        signal.request()
        signal.request()
        await waiter.value
        continuation.finish()
        var seen: [Int] = []
        for await call in calls { seen.append(call) }
        #expect(seen == [1])
        #expect(signal.isRequested)
        registration.cancel()
        // A handler registered after the request runs at once.
        let late = StopSignal()
        signal.onRequest { late.request() }
        #expect(late.isRequested)
    }

    /// A waiter whose task is cancelled returns instead of waiting forever.
    @Test func stopSignalWaiterEndsOnCancel() async {
        let signal = StopSignal()
        let waiter = Task { await signal.requested() }
        waiter.cancel()
        await waiter.value
        #expect(!signal.isRequested)
    }

    @Test func locationMatchesByNameOrAddress() throws {
        let app = try #require(BluetoothAddress("C0:FF:EE:00:00:01"))
        let location = DeviceLocation(addresses: [app.nordicBootloaderAddress], names: ["DfuTarg"])
        let byName = Advertisement(peer: PeerAddress(app, type: .random), rssi: -40, data: AdvertisingData.build(name: "DfuTarg"))
        let byAddress = Advertisement(peer: PeerAddress(app.nordicBootloaderAddress, type: .random), rssi: -40, data: [])
        let other = Advertisement(peer: PeerAddress(app, type: .random), rssi: -40, data: AdvertisingData.build(name: "Bracelet"))
        #expect(location.matches(byName))
        #expect(location.matches(byAddress))
        #expect(!location.matches(other))
        let merged = location.merged(with: DeviceLocation(PeerAddress(app, type: .random)))
        #expect(merged.addresses == [app.nordicBootloaderAddress, app])
        #expect(merged.description == "DfuTarg or \(app.nordicBootloaderAddress) or \(app)")
    }
}
