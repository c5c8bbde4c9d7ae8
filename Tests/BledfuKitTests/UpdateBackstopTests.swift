import DFUCore
import Foundation
import LinuxIO
import Testing

@testable import BledfuKit

/// What the backstop behind the update's watchdog leaves when it ends a process whose tasks no longer run (LinuxIO's
/// `ProcessBackstop`, its thread tested in TransportTests; `bledfu flash` starts it): the one error line, and with
/// `--json` the result record a batch reads (exit 49, `stalled`).
@Suite(.timeLimit(.minutes(1))) struct UpdateBackstopTests {
    @Test func itsLineNamesTheLimitAndTheResumableUpload() {
        let (output, error) = UpdateBackstop.lastWords(stallLimit: .seconds(120), exitStatus: 49, json: false, elapsed: .seconds(135))
        #expect(output.isEmpty)
        #expect(error.hasPrefix("bledfu: error: nothing happened for 120 s and the update did not end"))
        #expect(error.contains("--stall-timeout") && error.contains("resumable"))
        #expect(error.hasSuffix("\n") && error.dropLast().contains("\n") == false)
    }

    @Test func withJSONItWritesTheResultRecordABatchReads() throws {
        let (output, error) = UpdateBackstop.lastWords(
            stallLimit: .seconds(30), exitStatus: 49, json: true, elapsed: .milliseconds(45_500))
        #expect(error.hasPrefix("bledfu: error: nothing happened for 30 s"))
        #expect(output.hasSuffix("\n") && output.dropLast().contains("\n") == false)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
        // {"event":"result","success":false,"exitCode":49,"error":"stalled","seconds":45.5,...}
        #expect(object["event"] as? String == "result")
        #expect(object["success"] as? Bool == false)
        #expect(object["exitCode"] as? Int == 49)
        #expect(object["error"] as? String == "stalled")
        #expect(object["seconds"] as? Double == 45.5)
        // What the batch parses back: the same record type `--json` writes, as one line of the same encoding.
        let record = try JSONDecoder().decode(UpdateEventRecord.self, from: Data(output.utf8))
        guard case .result(let summary) = record.event else {
            Issue.record("not a result: \(record.event)")
            return
        }
        #expect(summary.exitCode == 49 && summary.error == "stalled" && !summary.success)
        #expect(JSONLine.text(record) == output)
    }

    @Test func theBackstopGivesTheWatchdogItsGraceAndMore() {
        // The updater's watchdog ends a stall at the limit plus its grace; the backstop only after that.
        #expect(UpdateBackstop.margin > StallGuard.grace)
        #expect(UpdateBackstop.margin == .seconds(15))  // docs/reliability.md: "--stall-timeout + 15 s"
        #expect(UpdateBackstop.start(stallLimit: nil, exitStatus: 49, json: false) == nil)
        #expect(UpdateBackstop.start(stallLimit: .zero, exitStatus: 49, json: false) == nil)
        let backstop = UpdateBackstop.start(stallLimit: .seconds(120), exitStatus: 49, json: false)
        #expect(backstop?.limit == .seconds(120) + UpdateBackstop.margin)
        backstop?.stop()
    }
}
