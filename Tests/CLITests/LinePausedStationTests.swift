import Batch
import Foundation
import Testing

/// A station paused, not killed (SIGSTOP to it and its `bledfu flash` children: Ctrl-Z, a suspended machine) while it
/// uploads to a device: the device restarts meanwhile (its link is gone), another station takes it over when the
/// paused station's lease runs out and finishes it. Then the paused station is continued (SIGCONT): it must not write
/// over the taker's record, and its child must not update the device a second time.
@Suite(.serialized, .enabled(if: TestLineDatabase.enabled, TestLineDatabase.skipReason))
struct LinePausedStationTests {
    @Test(.timeLimit(.minutes(5))) func aPausedStationComesBackAndChangesNothing() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let database = try await TestLineDatabase()
        let deviceState = line.directory.appendingPathComponent("device-state")
        // The sensor keeps its DFU progress across a restart (save_progress); speedup 1: the upload takes seconds.
        let simulatorArguments = ["--device", "sensor", "--speedup", "1", "--status-dir", line.status.path, "--json", "--state-dir", deviceState.path]
        var simulator: SimulatorProcess? = try SimulatorProcess(simulatorArguments, radio: line.radio)
        defer { simulator?.cleanUp() }
        try #require(await simulator?.waitUntil(timeout: 60) { simulator?.files(".adv").isEmpty == false } == true, "the sensor advertises")
        let plan = try line.writeMixedPlan(expect: 1, connections: 1)
        let first = try StationProcess(
            name: "s1", plan: plan, database: database.url, state: line.state.appendingPathComponent("s1"), lease: 6, in: line.directory)
        let deadline = Date().addingTimeInterval(180)
        var uploading = false
        while first.process.isRunning, Date() < deadline, !uploading {
            uploading = first.events.contains {
                $0["event"] as? String == "progress" && $0["stage"] as? String == "uploading" && ($0["bytes"] as? Int ?? 0) > 0
                    && ($0["bytes"] as? Int ?? 0) < ($0["total"] as? Int ?? 0)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        try #require(uploading && first.process.isRunning, "s1 never uploaded: \(first.stderr)\n\(first.events.suffix(5))")
        // Pause s1 and its children, then restart the device under them (its link to s1's child is gone).
        let paused = [first.pid] + Self.descendants(of: first.pid)
        // Whatever happens below, nothing of this test stays stopped (SIGCONT is harmless to a running process).
        defer { for pid in paused { kill(pid, SIGCONT) } }
        #expect(paused.count >= 2, "s1 has its bledfu flash child")
        for pid in paused { kill(pid, SIGSTOP) }
        _ = await simulator?.stop(signal: SIGKILL)
        for file in simulator?.files(".adv") ?? [] { try? FileManager.default.removeItem(at: line.radio.appendingPathComponent(file)) }
        simulator = try SimulatorProcess(simulatorArguments, radio: line.radio)
        try #require(await simulator?.waitUntil(timeout: 60) { simulator?.files(".adv").isEmpty == false } == true, "the sensor advertises again")

        // s2 takes the device over once s1's lease ran out, and finishes it.
        let second = try StationProcess(
            name: "s2", plan: plan, database: database.url, state: line.state.appendingPathComponent("s2"), lease: 6, in: line.directory)
        let secondStatus = await second.wait(timeout: 200)
        #expect(secondStatus == 0, "s2 exit \(secondStatus.map(String.init) ?? "none"): \(second.stderr)\n\(second.events.suffix(5))")
        let log = try await database.open()
        let before = try await log.attempts(batch: "line").map { "\($0.id) \($0.station ?? "-") \($0.result) \($0.finishedAt ?? "-") \($0.bytes)" }

        // s1 comes back: it stops its child (its lease is gone) and records nothing about the device.
        for pid in paused { kill(pid, SIGCONT) }
        let firstStatus = await first.wait(timeout: 60)
        #expect(firstStatus == 0 || firstStatus == 53, "s1 exit \(firstStatus.map(String.init) ?? "none"): \(first.stderr)")
        for _ in 0..<3000 where paused.dropFirst().contains(where: { kill($0, 0) == 0 && !Self.isZombie($0) }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!paused.dropFirst().contains { kill($0, 0) == 0 && !Self.isZombie($0) }, "s1's flash child ended")
        let said = first.stderr + first.events.compactMap { $0["message"] as? String }.joined(separator: "\n")
        #expect(
            said.contains("another station took this device over") || said.contains("has not taken a heartbeat"),
            "s1 says why it stopped: \(said)")

        print("paused station: s1 exit \(firstStatus.map(String.init) ?? "none"); \(said.split(separator: "\n").suffix(3).joined(separator: " | "))")
        let records = try await log.devices(batch: "line")
        let attempts = try await log.attempts(batch: "line")
        await log.close()
        let after = attempts.map { "\($0.id) \($0.station ?? "-") \($0.result) \($0.finishedAt ?? "-") \($0.bytes)" }
        #expect(after == before, "s1 changed no attempt: \(after) (before: \(before))")
        #expect(records.count == 1 && records.first?.status == .done && records.first?.station == "s2", "\(records)")
        #expect(attempts.map(\.station) == ["s1", "s2"] && attempts.map(\.result) == [.interrupted, .done], "\(attempts.map(\.result))")
        // The device: the new image, one update since its restart; s1's child is gone, so none can start later.
        let sha = try await BatchLine.imageSHA("sensor-app-v2.zip")
        let state = await line.waitForApplication(try #require(records.first?.address), sha256: sha)
        #expect(state.map(BatchLine.applicationSHA) == sha)
        #expect(BatchLine.updatesCompleted(state) == 1, "updated once: \(String(describing: state?["counters"]))")
        #expect(state?["mode"] as? String == "app")
        await database.drop()
    }

    /// Every process below `pid` (children, grandchildren), from /proc.
    static func descendants(of pid: Int32) -> [Int32] {
        var parents: [Int32: [Int32]] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = Int32(fields[1]) { parents[parent, default: []].append(child) }
        }
        var out: [Int32] = []
        var queue = [pid]
        while let next = queue.popLast() {
            for child in parents[next] ?? [] {
                out.append(child)
                queue.append(child)
            }
        }
        return out
    }

    static func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
    }
}
