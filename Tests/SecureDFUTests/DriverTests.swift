import BLECore
import DFUProtocol
import Foundation
import GATT
import Synchronization
import TestDoubles
import Testing

@testable import SecureDFU

/// A transport that hands the bytes to a ``FakeBootloader`` and delivers its notifications.
final class FakeTransport: DFUTransport, Sendable {
    let device: Mutex<FakeBootloader>
    let controlPointNotifications: AsyncStream<[UInt8]>
    let continuation: AsyncStream<[UInt8]>.Continuation
    let silent: Bool
    let mtuValue: Int

    init(device: FakeBootloader = FakeBootloader(), mtu: Int = 247, silent: Bool = false) {
        self.device = Mutex(device)
        (controlPointNotifications, continuation) = AsyncStream.makeStream()
        self.silent = silent
        mtuValue = mtu
    }

    var mtu: Int { get async { mtuValue } }
    var requests: [ControlPointRequest] { device.withLock { $0.requests } }

    func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError) {
        let replies = device.withLock { $0.controlPoint(bytes) }
        if !silent { for reply in replies { continuation.yield(reply) } }
    }

    func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError) {
        let replies = device.withLock { $0.packet(bytes) }
        for reply in replies { continuation.yield(reply) }
    }
}

@Suite(.timeLimit(.minutes(5))) struct DriverTests {
    let part = testPart(imageSize: 10_000)

    @Test func sendsAPartWithDropsAndKeepsTheJournal() async throws {
        var device = FakeBootloader()
        device.dropPackets = [4, 30]
        let transport = FakeTransport(device: device)
        let store = JournalRecorder()
        let clock = AutoPauseClock()
        let driver = SecureDFUDriver(transport: transport, clock: clock, checkpoint: store.checkpoint)
        let journal = DFUJournal(deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "abc")
        let updated = try await driver.run(part: part, partIndex: 0, partCount: 1, journal: journal)
        await driver.finish()
        // The default pacing is adaptive: its prepare delay after Create Data ran on the injected clock.
        #expect(SecureDFUConfiguration().pacing is AdaptiveStreamPacing)
        #expect(clock.pauses.first == .milliseconds(40))
        #expect(clock.now.offset >= .milliseconds(40))
        let firmware = transport.device.withLock { $0.firmware }
        #expect(firmware == part.image)
        #expect(updated?.executed.map(\.offset) == [4096, 8192, 10_000])
        #expect(updated?.executedOffset == 10_000)
        let stored = try await store.load(deviceAddress: "c0:ff:ee:00:00:01", packageSHA256: "ABC")
        #expect(stored == updated)
        var reports: [DFUProgressReport] = []
        for await report in driver.progress { reports.append(report) }
        #expect(reports.last?.progress.percent == 100)
        #expect(reports.last?.progress.retries ?? 0 >= 1)
        #expect(reports.allSatisfy { $0.partCount == 1 })
    }

    @Test func secondRunOnTheSameConnection() async throws {
        var device = FakeBootloader()
        device.executeCommandError = .firmwareAlreadyPresent
        let transport = FakeTransport(device: device)
        let driver = SecureDFUDriver(transport: transport, clock: AutoPauseClock())
        await #expect(throws: DFUEngineError(.remote, "")) { try await driver.run(part: part) }
        // The caller skips to another part (here: the same one, now accepted) on the same link.
        transport.device.withLock { $0.executeCommandError = nil }
        try await driver.run(part: part, partIndex: 1, partCount: 2)
        let firmware = transport.device.withLock { $0.firmware }
        #expect(firmware == part.image)
    }

    @Test(arguments: [false, true]) func cancellationSendsAbortOnlyWhenAsked(abortOnCancel: Bool) async throws {
        let clock = AutoPauseClock()
        let transport = FakeTransport(silent: true)
        let driver = SecureDFUDriver(
            transport: transport, clock: clock, configuration: SecureDFUConfiguration(abortOnCancel: abortOnCancel))
        let part = self.part
        let task = Task { try await driver.run(part: part) }
        await clock.waitForSleepers(1)  // Select Command written, response timer armed
        task.cancel()
        let result = await task.result
        #expect(throws: DFUEngineError(.cancelled, "")) { try result.get() }
        #expect(transport.requests == (abortOnCancel ? [.select(.command), .abort] : [.select(.command)]))
    }

    @Test func timeoutOnTheInjectedClock() async throws {
        let clock = AutoPauseClock()
        let transport = FakeTransport(silent: true)
        let driver = SecureDFUDriver(
            transport: transport, clock: clock, configuration: SecureDFUConfiguration(checkpointTimeout: .seconds(2)))
        let part = self.part
        let task = Task { try await driver.run(part: part) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(2))
        let result = await task.result
        #expect(throws: DFUEngineError(.timeout, "")) { try result.get() }
    }

    @Test func linkLossEndsTheRunAsDisconnected() async throws {
        let clock = AutoPauseClock()
        let transport = FakeTransport(silent: true)
        let driver = SecureDFUDriver(transport: transport, clock: clock)
        let part = self.part
        let task = Task { try await driver.run(part: part) }
        await clock.waitForSleepers(1)
        transport.continuation.finish()
        let result = await task.result
        #expect(throws: DFUEngineError(.disconnected, "")) { try result.get() }
    }
}

@Suite(.timeLimit(.minutes(5))) struct JournalTests {
    @Test func recordsAndResetsPerPart() {
        var journal = DFUJournal(deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "abc")
        journal.record(DFUExecutedObject(index: 1, offset: 8192, crc: 2), part: 0)
        journal.record(DFUExecutedObject(index: 0, offset: 4096, crc: 1), part: 0)
        journal.record(DFUExecutedObject(index: 1, offset: 8192, crc: 2), part: 0)
        #expect(journal.executed.map(\.index) == [0, 1])
        #expect(journal.executedOffset == 8192)
        journal.record(DFUExecutedObject(index: 0, offset: 4096, crc: 9), part: 1)
        #expect(journal.partIndex == 1)
        #expect(journal.executed == [DFUExecutedObject(index: 0, offset: 4096, crc: 9)])
    }

    @Test func jsonRoundTrip() throws {
        let journal = DFUJournal(
            deviceAddress: "C0:FF:EE:00:00:01", packageSHA256: "9f86", partIndex: 1,
            executed: [DFUExecutedObject(index: 0, offset: 4096, crc: 305_419_896)])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(journal)
        #expect(
            String(decoding: data, as: UTF8.self)
                == #"{"deviceAddress":"C0:FF:EE:00:00:01","executed":[{"crc":305419896,"index":0,"offset":4096}],"packageSHA256":"9f86","partIndex":1}"#
        )
        #expect(try JSONDecoder().decode(DFUJournal.self, from: data) == journal)
    }

    @Test func engineErrorDescriptions() {
        let error = DFUEngineError.remote(.failure(.insufficientResources), request: .create)
        #expect(error.description == "remote: Create (0x01) refused: insufficient resources (0x04)")
        let unknown = DFUEngineError(DFUEngineError.Code(rawValue: "future-code"), "from a newer journal")
        #expect(unknown.description == "future-code: from a newer journal")
        #expect(DFUEngineError(.timeout, "a") == DFUEngineError(.timeout, "b"))
    }
}
