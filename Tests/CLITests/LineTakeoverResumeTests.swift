import DFUPackage
import Batch
import Foundation
import Testing

/// A station that takes a device over from a dead station resumes it from the journal the dead station left in the
/// line's shared store (LineJournalSync, docs/batch.md "A line of stations"), not from zero: real `bledfu batch`
/// processes, a real `bledfu simulate`, the real PostgreSQL server.
@Suite(.serialized, .enabled(if: TestLineDatabase.enabled, TestLineDatabase.skipReason))
struct LineTakeoverResumeTests {
    /// Station s1 flashes one bracelet and is killed (SIGKILL) once the store holds a journal of its upload with
    /// confirmed bytes. Station s2 starts afterwards on a state directory of its own (no journal file: the store is
    /// its only source), takes the device over when s1's lease runs out and finishes it.
    ///
    /// What proves the resume: s2's `bledfu flash` child reports that it continues a previous upload from the
    /// journal's part and executed bytes (its device log); s2's attempt sent at most the image minus the journal's
    /// offset; its first confirmed bytes are where the device stopped (at or beyond the journal's offset: the
    /// Secure DFU device itself reports its offset, and s1's child may have executed more after its last push); the
    /// store's journal row is gone once the device is done; the device runs the new image and completed exactly one
    /// update.
    @Test(.timeLimit(.minutes(5))) func aTakenOverDeviceResumesFromTheDeadStationsJournalInTheStore() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let database = try await TestLineDatabase()
        // Speedup 1: the upload of the 29 284-byte image takes several seconds, and s1's heartbeat (every lease / 3)
        // pushes the journal of the executed 4 KiB objects before the end.
        try line.simulate(["bracelet:1"], ["--json"], speedup: 1)
        try await line.waitForDevices(1)
        let plan = try line.writePlan(expect: 1, connections: 1)
        let imageSize = try Self.imageSize("bracelet-app-v2.zip")
        let log = try await database.open()

        // Lease 8 s (heartbeat and journal push every 2.7 s): long enough that a loaded machine does not make a
        // station stop itself for a silent heartbeat (0.6 of the lease), short enough that s1's claim soon lapses.
        let firstState = line.state.appendingPathComponent("s1")
        let first = try StationProcess(name: "s1", plan: plan, database: database.url, state: firstState, lease: 8, in: line.directory)
        // Kill s1 once the store holds its journal with at least one executed object (a generous deadline).
        var seen: StoredJournal?
        let deadline = Date().addingTimeInterval(120)
        while first.process.isRunning, Date() < deadline {
            seen = try await Self.storedJournal(log)
            if let seen, seen.station == "s1", seen.confirmedBytes > 0 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let found = try #require(seen, "s1 pushed no journal to the store: \(first.stderr)\n\(first.events.suffix(5))")
        try #require(first.process.isRunning && found.confirmedBytes > 0, "s1 ended before its journal had confirmed bytes: \(found)")
        kill(first.pid, SIGKILL)
        _ = await first.wait(timeout: 30)

        // What the store holds after the kill: s1's journal of the cut upload, an object boundary inside the image.
        let journal = try #require(try await Self.storedJournal(log), "the dead station's journal is in the store")
        #expect(journal.station == "s1")
        #expect(journal.partIndex == 0)
        #expect(journal.confirmedBytes > 0 && journal.confirmedBytes < imageSize, "\(journal)")
        #expect(journal.confirmedBytes % 4096 == 0, "an executed object's end: \(journal.confirmedBytes)")

        let secondState = line.state.appendingPathComponent("s2")
        try FileManager.default.createDirectory(at: secondState, withIntermediateDirectories: true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: secondState.path).isEmpty, "s2 starts with no journal file")
        let second = try StationProcess(name: "s2", plan: plan, database: database.url, state: secondState, lease: 8, in: line.directory)
        let status = await second.wait(timeout: 180)
        #expect(status == 0, "s2 exit \(status.map(String.init) ?? "none"): \(second.stderr)\n\(second.events.suffix(5))")

        let records = try await log.devices(batch: "line")
        let attempts = try await log.attempts(batch: "line")
        let leftover = try await Self.storedJournal(log)
        await log.close()
        let record = try #require(records.first)
        #expect(records.count == 1)
        #expect(record.status == .done && record.station == "s2" && record.versionAfter == 2, "\(record)")
        let cut = attempts.filter { $0.station == "s1" }
        #expect(cut.count == 1 && cut.first?.result == .interrupted, "\(cut.map(\.result))")
        #expect(cut.first?.error?.contains("station s1 stopped renewing its claim") == true, "\(cut.first?.error ?? "-")")
        let taken = attempts.filter { $0.station == "s2" }
        let taker = try #require(taken.first)
        #expect(taken.count == 1 && taker.result == .done, "\(taken.map(\.result))")
        // s2's `bledfu flash` child loaded the journal (UpdateFlow says so when a journal has confirmed bytes): with
        // no journal file in s2's state directory before, the store's copy is the only place it came from.
        let childLog = (try? String(contentsOf: secondState.appendingPathComponent("batch-logs/\(record.address.replacingOccurrences(of: ":", with: "-")).log"), encoding: .utf8)) ?? ""
        #expect(childLog.contains("continuing a previous upload: part 1, \(journal.confirmedBytes) bytes executed"), "\(childLog)")
        // Resumed, not from zero: the bytes sent are at most the image minus the journal's offset.
        #expect(taker.bytes > 0 && taker.bytes <= imageSize - journal.confirmedBytes, "s2 sent \(taker.bytes) of \(imageSize) bytes; journal at \(journal.confirmedBytes)")
        // s2's first report of confirmed bytes (after the part's start marker, which carries none) is where the
        // device stopped: at or beyond the journal's offset.
        let confirmed = second.events.filter { $0["event"] as? String == "progress" && $0["stage"] as? String == "uploading" }
            .compactMap { $0["bytes"] as? Int }.filter { $0 > 0 }
        let resumedAt = try #require(confirmed.first, "s2 reported no confirmed bytes: \(second.events.suffix(5))")
        #expect(resumedAt >= journal.confirmedBytes, "s2's first confirmed bytes \(resumedAt), journal at \(journal.confirmedBytes): \(confirmed)")
        print("line takeover: s1's journal at \(journal.confirmedBytes) B; s2 resumed at \(resumedAt) B, counted \(taker.bytes) of \(imageSize) B")
        #expect(leftover == nil, "the store's journal goes with the finished update: \(String(describing: leftover))")

        let sha = try await BatchLine.imageSHA("bracelet-app-v2.zip")
        let device = await line.waitForApplication(record.address, sha256: sha)
        #expect(device.map(BatchLine.applicationSHA) == sha, "\(record.address) runs the new image")
        #expect(BatchLine.updatesCompleted(device) == 1, "\(record.address) completed one update")
        await database.drop()
    }

    /// The journals table's only row, decoded (the content is a `bledfu flash` journal file).
    struct StoredJournal: CustomStringConvertible {
        var address: String
        var station: String?
        var partIndex: Int
        var confirmedBytes: Int

        var description: String { "\(address) by \(station ?? "-"): part \(partIndex), \(confirmedBytes) bytes confirmed" }
    }

    static func storedJournal(_ log: BatchLog) async throws -> StoredJournal? {
        let rows = try await log.database.transaction(write: false) { s in
            try await s.rows("SELECT address, station, content FROM journals", [])
        }
        guard let row = rows.first else { return nil }
        let content = try #require(row.string("content"))
        let file = try #require(try JSONSerialization.jsonObject(with: Data(content.utf8)) as? [String: Any])
        let journal = try #require(file["journal"] as? [String: Any], "\(content)")
        return StoredJournal(
            address: row.string("address") ?? "", station: row.string("station"), partIndex: journal["partIndex"] as? Int ?? -1,
            confirmedBytes: journal["confirmedBytes"] as? Int ?? 0)
    }

    /// The size of a sample package's application image.
    static func imageSize(_ sample: String) throws -> Int {
        let url = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/\(sample)")
        return try #require(try FirmwarePackage(contentsOf: url).part(.application)?.image.count)
    }
}
