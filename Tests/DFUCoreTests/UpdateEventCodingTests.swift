import Foundation
import Testing

@testable import DFUCore

@Suite(.timeLimit(.minutes(2))) struct UpdateEventCodingTests {
    static func json(_ event: UpdateEvent) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(event), as: UTF8.self)
    }

    /// The wire form `bledfu flash --json` has always written (batch and scripts read it).
    @Test func wireFormat() throws {
        #expect(try Self.json(.connecting(address: "C0:FF:EE:00:00:01"))
            == #"{"address":"C0:FF:EE:00:00:01","event":"state","state":"connecting"}"#)
        #expect(try Self.json(.updaterReady(family: .secure, address: "C0:FF:EE:00:00:02"))
            == #"{"address":"C0:FF:EE:00:00:02","event":"state","family":"secure","state":"bootloader"}"#)
        #expect(try Self.json(.reconnecting(attempt: 2, of: 5, delayMilliseconds: 1000))
            == #"{"attempt":2,"delayMs":1000,"event":"state","of":5,"state":"reconnecting"}"#)
        #expect(try Self.json(.warning("x")) == #"{"event":"warning","message":"x"}"#)
        #expect(try Self.json(.found(address: "A", name: "DfuTarg", byName: true))
            == #"{"address":"A","by":"name","event":"state","name":"DfuTarg","state":"found"}"#)
    }

    static let every: [UpdateEvent] = [
        .scanning(name: "Bracelet"), .connecting(address: "C0:FF:EE:00:00:01"),
        .found(address: "C0:FF:EE:00:00:02", name: "DfuTarg", byName: false),
        .detected(family: .smp, mode: .applicationWithoutEntry, address: "C0:FF:EE:00:00:01"),
        .updaterReady(family: .legacy, address: "C0:FF:EE:00:00:02"),
        .applicationMode(address: "C0:FF:EE:00:00:01", bonded: true), .jumping(address: "C0:FF:EE:00:00:01", bonded: false),
        .reconnecting(attempt: 1, of: 5, delayMilliseconds: 500),
        .uploading(part: 1, parts: 2, name: "softdevice+bootloader", bytes: 152_392),
        .progress(
            UpdateProgress(
                part: 2, parts: 2, object: 3, objects: 10, bytes: 12_288, total: 40_000, bytesPerSecond: 9000,
                averageBytesPerSecond: 8000, retries: 1, bytesResent: 244, etaSeconds: 3)),
        .progress(UpdateProgress(part: 1, parts: 1, bytes: 0, total: 100)),
        .partCompleted(part: 1, name: "application"),
        .partSkipped(part: 1, name: "softdevice", reason: "firmware already present"),
        .completed(address: "C0:FF:EE:00:00:01"), .warning("careful"), .message("hello"),
        .result(UpdateSummary(success: false, exitCode: 43, error: "link-lost", statistics: UpdateStatistics(), message: "gone")),
        .unknown(event: "state", state: "teleporting"), .unknown(event: "telemetry", state: nil),
    ]

    /// Every event decodes back to itself, with and without the emitter's time.
    @Test(arguments: every) func roundTrip(_ event: UpdateEvent) throws {
        let data = try JSONEncoder().encode(event)
        #expect(try JSONDecoder().decode(UpdateEvent.self, from: data) == event)
        let record = UpdateEventRecord(event, elapsed: 1.25, time: "2026-11-28T04:05:06.789Z")
        let encoded = try JSONEncoder().encode(record)
        let decoded = try JSONDecoder().decode(UpdateEventRecord.self, from: encoded)
        #expect(decoded == record)
        #expect(String(decoding: encoded, as: UTF8.self).contains(#""time":"2026-11-28T04:05:06.789Z""#))
        // A line without a time (an older writer) still reads.
        let untimed = UpdateEventRecord(event, elapsed: 1.25)
        #expect(try JSONDecoder().decode(UpdateEventRecord.self, from: try JSONEncoder().encode(untimed)) == untimed)
    }

    /// Lines written by older versions (no `family`) still read.
    @Test func olderLines() throws {
        let line = #"{"event":"state","state":"bootloader","address":"C0:FF:EE:00:00:02"}"#
        #expect(try JSONDecoder().decode(UpdateEvent.self, from: Data(line.utf8))
            == .updaterReady(family: .secure, address: "C0:FF:EE:00:00:02"))
        let result = #"{"event":"result","success":true,"exitCode":0,"seconds":1.5,"bytesSent":10,"bytesResent":0,"averageBytesPerSecond":6,"checkpoints":1,"reconnects":0,"partsSkipped":0}"#
        guard case .result(let summary) = try JSONDecoder().decode(UpdateEvent.self, from: Data(result.utf8)) else {
            Issue.record("not a result")
            return
        }
        #expect(summary.success && summary.exitCode == 0 && summary.bytesSent == 10 && summary.averageBytesPerSecond == 6)
    }

    /// A line without an `event` key is not an event.
    @Test func notAnEvent() {
        #expect(throws: (any Error).self) { try JSONDecoder().decode(UpdateEvent.self, from: Data(#"{"state":"x"}"#.utf8)) }
    }
}
