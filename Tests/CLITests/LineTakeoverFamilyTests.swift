import Batch
import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

/// A station killed while a Legacy DFU or an MCUmgr SMP device of a line is uploading: another station takes the
/// device over on the shared PostgreSQL store and finishes it (Legacy DFU sends the image again from zero, SMP goes on
/// from the offset the device reports). Real `bledfu batch` stations, a real `bledfu simulate`, the real server.
@Suite(.serialized, .enabled(if: TestLineDatabase.enabled, TestLineDatabase.skipReason))
struct LineTakeoverFamilyTests {
    @Test(.timeLimit(.minutes(5)), arguments: ["sdk11-nrf51", "smp-sensor"])
    func aTakenOverDeviceOfAnotherFamilyIsFinished(_ profile: String) async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let database = try await TestLineDatabase()
        // Speedup 1: the upload takes seconds, so s1 is killed inside it.
        try line.simulate([profile], ["--json"], speedup: 1)
        try await line.waitForDevices(1)
        let plan = try line.writeMixedPlan(expect: 1, connections: 1)
        let first = try StationProcess(
            name: "s1", plan: plan, database: database.url, state: line.state.appendingPathComponent("s1"), lease: 8, in: line.directory)
        // Kill s1 once its device has reported upload progress (bytes on their way, not all of them).
        var uploading = false
        let deadline = Date().addingTimeInterval(180)
        while first.process.isRunning, Date() < deadline, !uploading {
            uploading = first.events.contains {
                $0["event"] as? String == "progress" && $0["stage"] as? String == "uploading" && ($0["bytes"] as? Int ?? 0) > 0
                    && ($0["bytes"] as? Int ?? 0) < ($0["total"] as? Int ?? 0)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        try #require(uploading && first.process.isRunning, "s1 never uploaded: \(first.stderr)\n\(first.events.suffix(5))")
        kill(first.pid, SIGKILL)
        _ = await first.wait(timeout: 30)

        let secondState = line.state.appendingPathComponent("s2")
        try FileManager.default.createDirectory(at: secondState, withIntermediateDirectories: true)
        let second = try StationProcess(name: "s2", plan: plan, database: database.url, state: secondState, lease: 8, in: line.directory)
        let status = await second.wait(timeout: 240)
        #expect(status == 0, "s2 exit \(status.map(String.init) ?? "none"): \(second.stderr)\n\(second.events.suffix(5))")

        let log = try await database.open()
        let records = try await log.devices(batch: "line")
        let attempts = try await log.attempts(batch: "line")
        await log.close()
        let record = try #require(records.first)
        #expect(records.count == 1 && record.status == .done && record.station == "s2", "\(records)")
        let cut = attempts.filter { $0.station == "s1" }
        #expect(cut.count == 1 && cut.first?.result == .interrupted, "\(cut.map(\.result))")
        #expect(cut.first?.error?.contains("station s1 stopped renewing its claim") == true, "\(cut.first?.error ?? "-")")
        #expect(cut.first?.duration != nil, "the cut attempt has its duration")
        #expect(attempts.filter { $0.station == "s2" }.map(\.result) == [.done], "\(attempts.map(\.result))")

        if profile == "smp-sensor" {
            let samples = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples")
            let hash = try #require(
                try MCUbootImage(bytes: Array(Data(contentsOf: samples.appendingPathComponent("smp-sensor-app-v2.bin")))).hashTLV)
            let state = await line.waitForSMPImage(record.address, hash: hash)
            let active = state?.images.first { $0.active }
            #expect(active?.hash == hash && active?.confirmed == true, "\(record.address) runs the MCUboot image, confirmed")
            #expect(state?.counters.swaps == 1, "swapped once: \(state.map { "\($0.counters)" } ?? "-")")
        } else {
            let sha = try await BatchLine.imageSHA("sdk11-nrf51-app-v2.zip")
            let state = await line.waitForApplication(record.address, sha256: sha)
            #expect(state.map(BatchLine.applicationSHA) == sha, "\(record.address) runs the new image")
            #expect(BatchLine.updatesCompleted(state) == 1, "\(record.address) completed one update")
        }
        await database.drop()
    }
}
