import BLECore
import DFUProtocol
import GATT
import DFUCore
import Synchronization
import TestDoubles
import Testing

@testable import SecureDFU

/// A ``FakeTransport`` that runs `hook` before the packet with index `trigger` (counted from 0) is written.
final class HookedTransport: DFUTransport, Sendable {
    let inner: FakeTransport
    let trigger: Int
    let written = Mutex(0)
    let hook: Mutex<(@Sendable () async -> Void)?> = Mutex(nil)

    init(_ inner: FakeTransport, trigger: Int) {
        self.inner = inner
        self.trigger = trigger
    }

    func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError) { try await inner.writeControlPoint(bytes) }

    func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError) {
        let index = written.withLock { count in
            defer { count += 1 }
            return count
        }
        if index == trigger, let hook = hook.withLock({ $0 }) { await hook() }
        try await inner.writePacket(bytes)
    }

    var controlPointNotifications: AsyncStream<[UInt8]> { inner.controlPointNotifications }
    var mtu: Int { get async { await inner.mtu } }
}

@Suite(.timeLimit(.minutes(5))) struct StopAtASafePointTests {
    let part = testPart(imageSize: 10_000)  // objects end at 4096, 8192, 10 000

    /// `requestStop()` during object 1 ends the run right after object 1 is executed and journaled: no Abort, no
    /// Create of object 2; a new driver with the journal finishes the part without resending executed data.
    @Test func stopsAfterTheCurrentObjectAndResumes() async throws {
        let fake = FakeTransport()
        let transport = HookedTransport(fake, trigger: 2)  // init packet = packet 0, then data packets
        let store = JournalRecorder()
        let driver = SecureDFUDriver(transport: transport, clock: AutoPauseClock(), checkpoint: store.checkpoint)
        transport.hook.withLock { $0 = { await driver.requestStop() } }
        let journal = DFUJournal(deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "abc")
        let part = self.part
        await #expect(throws: DFUEngineError(.stopped, "")) {
            try await driver.run(part: part, partIndex: 0, partCount: 1, journal: journal)
        }
        let requests = fake.requests
        #expect(!requests.contains(.abort))
        let creates = requests.filter { if case .create(.data, _) = $0 { true } else { false } }
        #expect(creates.count == 1, "only object 0 was created: \(requests)")
        #expect(requests.last == .execute)
        let saved = try #require(try await store.load(deviceAddress: journal.deviceAddress, packageSHA256: "abc"))
        #expect(saved.executedOffset == 4096)

        // A new connection: a new transport (its own notification stream) to the same device, and a new driver.
        let reconnected = FakeTransport(device: fake.device.withLock { $0 })
        let resumed = SecureDFUDriver(transport: reconnected, clock: AutoPauseClock(), checkpoint: store.checkpoint)
        let finished = try await resumed.run(part: part, partIndex: 0, partCount: 1, journal: saved)
        #expect(finished?.executedOffset == 10_000)
        #expect(reconnected.device.withLock { $0.firmware } == part.image)
        let after = reconnected.requests.dropFirst(requests.count)
        #expect(!after.contains(.create(type: .command, size: UInt32(part.initPacket.count))))
        // Objects 1 and 2 only: executed object 0 is not sent again.
        #expect(after.filter { if case .create(.data, _) = $0 { true } else { false } }.count == 2, "\(after)")
    }

    /// A stop asked for before the run starts writes nothing at all.
    @Test func stopBeforeTheRunWritesNothing() async throws {
        let fake = FakeTransport()
        let driver = SecureDFUDriver(transport: fake, clock: AutoPauseClock())
        await driver.requestStop()
        let part = self.part
        await #expect(throws: DFUEngineError(.stopped, "")) { try await driver.run(part: part) }
        #expect(fake.requests.isEmpty)
    }

    /// The state machine: a stop during the init packet takes effect once the init packet is executed.
    @Test func stopDuringTheInitPacketEndsAfterItsExecute() throws {
        var machine = SecureDFUStateMachine(part: part)
        _ = machine.handle(.started(mtu: 247))
        #expect(machine.handle(.stopRequested).isEmpty)
        let selected = ControlPointResponse.select(maxSize: 512, offset: 0, crc: 0).encoded
        let afterSelect = machine.handle(.controlPointNotification(selected))
        #expect(afterSelect.first == .writeControlPoint(.create(type: .command, size: UInt32(part.initPacket.count))))
        _ = machine.handle(.controlPointNotification(ControlPointResponse(request: .create, status: .success, payload: []).encoded))
        _ = machine.handle(.controlPointNotification(ControlPointResponse(request: .setPRN, status: .success, payload: []).encoded))
        let crc = CRC32.checksum(part.initPacket)
        _ = machine.handle(.packetsSent)
        let checked = ControlPointResponse.checksum(offset: UInt32(part.initPacket.count), crc: crc).encoded
        #expect(machine.handle(.controlPointNotification(checked)).first == .writeControlPoint(.execute))
        let executed = ControlPointResponse(request: .execute, status: .success, payload: []).encoded
        let last = machine.handle(.controlPointNotification(executed))
        #expect(last == [.failed(DFUEngineError(.stopped, ""))])
        #expect(machine.isFinished)
    }
}

@Suite(.timeLimit(.minutes(5))) struct ReconnectPolicyTests {
    @Test func backoffDoublesUpToTheCap() {
        let policy = ReconnectPolicy(attempts: 7)
        #expect(policy.episodeDelays == [0.5, 1, 2, 4, 8, 8, 8].map { Duration.milliseconds(Int64($0 * 1000)) })
        #expect(ReconnectPolicy(attempts: 0).episodeDelays.isEmpty)
    }

    /// `--reconnect-attempts 0`: the first loss already ends the run.
    @Test func zeroAttemptsNeverReconnects() {
        var budget = ReconnectBudget(policy: ReconnectPolicy(attempts: 0))
        let reconnect = budget.linkLost(progressed: true)
        #expect(!reconnect)
        #expect(budget.episodes == 0)
    }

    /// The budget is per episode: losses after progress start afresh; losses without progress run out.
    @Test func episodesWithoutProgressRunOut() {
        var budget = ReconnectBudget(policy: ReconnectPolicy(attempts: 2))
        let stalled = (0..<3).map { _ in budget.linkLost(progressed: false) }
        #expect(stalled == [true, true, false])
        var fresh = ReconnectBudget(policy: ReconnectPolicy(attempts: 2))
        let progressing = (0..<10).map { _ in fresh.linkLost(progressed: true) }
        #expect(progressing.allSatisfy { $0 })
        #expect(fresh.episodes == 10)
        let thenStalled = (0..<2).map { _ in fresh.linkLost(progressed: false) }
        #expect(thenStalled == [true, false])
    }
}

/// A ``FakeTransport`` whose Control Point misbehaves from a chosen request on: the `failAt`-th Execute write fails
/// as on a dropped link, or every answer is swallowed after the first Create Data (`muteAfterCreateData`).
final class MisbehavingTransport: DFUTransport, Sendable {
    let inner: FakeTransport
    let failAt: Int?
    let muteAfterCreateData: Bool
    let executes = Mutex(0)
    let muted = Mutex(false)

    init(_ inner: FakeTransport, failExecute: Int? = nil, muteAfterCreateData: Bool = false) {
        self.inner = inner
        failAt = failExecute
        self.muteAfterCreateData = muteAfterCreateData
    }

    func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError) {
        if bytes.first == 0x04 {
            let count = executes.withLock { value in
                value += 1
                return value
            }
            if count == failAt {
                _ = inner.device.withLock { $0.controlPoint(bytes) }  // The device got it; its answer is lost.
                throw DFUTransportError(.disconnected, "link lost")
            }
        }
        if muted.withLock({ $0 }) { return }
        try await inner.writeControlPoint(bytes)
        if muteAfterCreateData, bytes.starts(with: [0x01, 0x02]) { muted.withLock { $0 = true } }
    }

    func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError) {
        if muted.withLock({ $0 }) {
            _ = inner.device.withLock { $0.packet(bytes) }
            return
        }
        try await inner.writePacket(bytes)
    }

    var controlPointNotifications: AsyncStream<[UInt8]> { inner.controlPointNotifications }
    var mtu: Int { get async { await inner.mtu } }
}

@Suite(.timeLimit(.minutes(5))) struct UnacknowledgedRequestTests {
    let part = testPart(imageSize: 10_000)  // 1 init Execute + 3 data Executes

    /// The last Execute's write fails: the engine cannot know whether it took effect, says so, and does not claim
    /// success (the caller looks where the device restarts).
    @Test func unacknowledgedLastExecuteIsUnconfirmed() async throws {
        let transport = MisbehavingTransport(FakeTransport(), failExecute: 4)
        let driver = SecureDFUDriver(transport: transport, clock: AutoPauseClock())
        let part = self.part
        await #expect(throws: DFUEngineError(.executeUnconfirmed, "")) { try await driver.run(part: part) }
    }

    /// An earlier Execute's write fails: an ordinary (resumable) link loss.
    @Test func unacknowledgedEarlierExecuteIsADisconnect() async throws {
        let transport = MisbehavingTransport(FakeTransport(), failExecute: 2)
        let driver = SecureDFUDriver(transport: transport, clock: AutoPauseClock())
        let part = self.part
        await #expect(throws: DFUEngineError(.disconnected, "")) { try await driver.run(part: part) }
    }

    /// A device that stops answering inside an object: one unanswered checkpoint is asked again, the second ends
    /// the run with `timeout` after exactly two timeouts on the injected clock.
    @Test func twoSilentCheckpointsAreATimeout() async throws {
        let clock = AutoPauseClock()
        let transport = MisbehavingTransport(FakeTransport(), muteAfterCreateData: true)
        let timeout = Duration.seconds(3)
        let driver = SecureDFUDriver(
            transport: transport, clock: clock,
            configuration: SecureDFUConfiguration(pacing: ChecksumPacing(interval: 4), checkpointTimeout: timeout))
        let part = self.part
        let finished = Mutex(false)
        let run = Task {
            defer { finished.withLock { $0 = true } }
            return try await driver.run(part: part)
        }
        // The clock moves (500 ms at a time, while the engine waits on it) only once the device went silent.
        var silentFor = Duration.zero
        while !finished.withLock({ $0 }), silentFor < .seconds(60) {
            if transport.muted.withLock({ $0 }), clock.sleeperCount > 0 {
                clock.advance(by: .milliseconds(500))
                silentFor += .milliseconds(500)
            }
            await Task.yield()
        }
        let result = await run.result
        #expect(throws: DFUEngineError(.timeout, "")) { try result.get() }
        if case .failure(let error as DFUEngineError) = result { #expect(error.reason.contains("stopped answering")) }
        // Exactly two timeouts, give or take the one 500 ms step taken while the last answered request's timer ran.
        #expect(silentFor >= timeout * 2 && silentFor <= timeout * 2 + .milliseconds(500), "failed after \(silentFor)")
    }
}
