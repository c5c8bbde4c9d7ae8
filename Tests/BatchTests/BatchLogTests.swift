import BLECore
import Foundation
import Synchronization
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

@testable import Batch

@Suite(.timeLimit(.minutes(5))) struct BatchLogTests {
    static let date = Date(timeIntervalSince1970: 1_800_000_000)

    static func identity(_ index: Int, sha: String = Fixture.package.sha256) -> DeviceRecord.Identity {
        DeviceRecord.Identity(
            address: Fixture.address(index).description, addressType: "random", name: "Bracelet-\(index)", className: "bracelet",
            packagePath: "/tmp/app-v2.zip", packageSHA256: sha, targetVersion: 2)
    }

    @Test func theDatabaseIsARealSQLiteFileInWALMode() async throws {
        let (log, url) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(url) }
        #expect(try (log.database as? SQLiteLineDatabase)?.journalMode() == "wal")
        let header = try #require(FileManager.default.contents(atPath: url.path)).prefix(16)
        #expect(String(decoding: header, as: UTF8.self) == "SQLite format 3\0")
    }

    /// A row per attempt, a final status per device with every column the issue lists.
    @Test func attemptsAndFinalStatusesAreRecorded() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let run = try await log.startRun(batch: "line", station: Fixture.station, force: false, at: Self.date)
        try await log.enroll(batch: "line", device: Self.identity(1), at: Self.date)
        let address = Fixture.address(1).description
        let first = try await log.beginAttempt(run: run, batch: "line", address: address, adapter: "hci0", at: Self.date)
        #expect(first.number == 1)
        try await log.endAttempt(
            first.id, batch: "line", address: address,
            outcome: AttemptOutcome(result: .failed, error: "link lost", exitCode: 43, duration: 2, bytes: 4096, resends: 20, versionBefore: 1),
            final: nil, at: Self.date)
        let second = try await log.beginAttempt(run: run, batch: "line", address: address, adapter: "hci1", at: Self.date)
        #expect(second.number == 2)
        try await log.endAttempt(
            second.id, batch: "line", address: address,
            outcome: AttemptOutcome(result: .done, exitCode: 0, duration: 3.5, bytes: 25_000, resends: 1, versionBefore: 1, versionAfter: 2),
            final: .done, at: Self.date)
        try await log.finishRun(run, station: Fixture.station.name, result: "ok", at: Self.date)

        let attempts = try await log.attempts(batch: "line")
        #expect(attempts.map(\.result) == [.failed, .done])
        #expect(attempts.map(\.adapter) == ["hci0", "hci1"])
        #expect(attempts[0].error == "link lost" && attempts[0].exitCode == 43 && attempts[0].bytes == 4096)
        #expect(attempts.allSatisfy { $0.finishedAt != nil && $0.packageSHA256 == Fixture.package.sha256 })
        let device = try #require(try await log.devices(batch: "line").first)
        #expect(device.status == .done)
        #expect(device.name == "Bracelet-1")
        #expect(device.versionBefore == 1 && device.versionAfter == 2)
        #expect(device.attempts == 2)
        #expect(device.duration == 5.5)
        #expect(device.bytes == 29_096 && device.resends == 21)
        #expect(device.adapter == "hci1")
        #expect(device.error == nil)
    }

    /// Issue 19 point 3: a device's record comes from its last attempt only. A device flashed to 2 in an earlier
    /// run, then refused a package (no version after: the attempt failed before the device ran anything new) keeps
    /// no version_after of the earlier attempt; its version_before is the last attempt's.
    @Test func aDeviceRecordDescribesItsLastAttemptOnly() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let run = try await log.startRun(batch: "line", station: Fixture.station, force: false, at: Self.date)
        try await log.enroll(batch: "line", device: Self.identity(1), at: Self.date)
        let address = Fixture.address(1).description
        let first = try await log.beginAttempt(run: run, batch: "line", address: address, adapter: "hci0", at: Self.date)
        try await log.endAttempt(
            first.id, batch: "line", address: address,
            outcome: AttemptOutcome(result: .done, exitCode: 0, versionBefore: 1, versionAfter: 2), final: nil, at: Self.date)
        let second = try await log.beginAttempt(run: run, batch: "line", address: address, adapter: "hci0", at: Self.date)
        try await log.endAttempt(
            second.id, batch: "line", address: address,
            outcome: AttemptOutcome(result: .failed, error: "the device would refuse app.zip", exitCode: 48, versionBefore: 2),
            final: .failed, at: Self.date)
        let device = try #require(try await log.devices(batch: "line").first)
        #expect(device.versionBefore == 2, "version_before of the first attempt kept")
        #expect(device.versionAfter == nil, "version_after of the first attempt kept")
        #expect(device.exitCode == 48)
    }

    /// A run dies with an attempt open (no endAttempt, no finishRun). The next run on the same file closes it as
    /// interrupted and finishes that device only: the done device is never flashed again, and every device has
    /// exactly one record.
    @Test func aCrashedRunIsFinishedByTheNextRunWithoutReflashing() async throws {
        let (firstLog, url) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(url) }
        let crashed = try await firstLog.startRun(batch: "line.yaml", station: Fixture.station, force: false, at: Self.date)
        for index in 1...3 { try await firstLog.enroll(batch: "line.yaml", device: Self.identity(index), at: Self.date) }
        let done = try await firstLog.beginAttempt(run: crashed, batch: "line.yaml", address: Fixture.address(1).description, adapter: "hci0", at: Self.date)
        try await firstLog.endAttempt(
            done.id, batch: "line.yaml", address: Fixture.address(1).description,
            outcome: AttemptOutcome(result: .done, versionBefore: 1, versionAfter: 2), final: .done, at: Self.date)
        _ = try await firstLog.beginAttempt(run: crashed, batch: "line.yaml", address: Fixture.address(2).description, adapter: "hci0", at: Self.date)
        // kill -9 here: nothing else is written.

        let log = try await BatchLog.open(path: url.path)
        #expect(try await log.unfinished(batch: "line.yaml").map(\.address).sorted() == [2, 3].map { Fixture.address($0).description })
        let flasher = FakeFlasher()
        // The rerun is given only the first device (e.g. discovery saw just that one): the other two come from the log.
        let scheduler = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)]), flasher: flasher, log: log)
        let summary = try await scheduler.run(targets: Array(Fixture.targets(1)))
        #expect(summary.done == 3)
        let flashes = flasher.counters.withLock { $0.flashes }
        #expect(flashes[Fixture.address(1).description] == nil)
        #expect(flashes[Fixture.address(2).description] == 1)
        #expect(flashes[Fixture.address(3).description] == 1)
        let records = try await log.devices(batch: "line.yaml")
        #expect(records.count == 3)
        #expect(Set(records.map(\.address)).count == 3)
        #expect(records.allSatisfy { $0.status == .done })
        let attempts = try await log.attempts(batch: "line.yaml")
        #expect(attempts.filter { $0.result == .interrupted }.map(\.address) == [Fixture.address(2).description])
        #expect(attempts.filter { $0.result == .done }.count == 3)

        // A third run changes nothing; --force flashes them all again.
        let again = try await Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)]), flasher: flasher, log: log).run(targets: Fixture.targets(3))
        #expect(again.done == 3)
        #expect(flasher.counters.withLock { $0.flashes.values.reduce(0, +) } == 2)
        var forced = Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)]), flasher: flasher, log: log)
        forced.force = true
        _ = try await forced.run(targets: Fixture.targets(3))
        #expect(flasher.counters.withLock { $0.flashes.values.reduce(0, +) } == 5)
        #expect(try await log.devices(batch: "line.yaml").count == 3)
    }

    /// A device done with this package in another batch of the same database is recorded as skipped here.
    @Test func doneInAnotherBatchIsSkipped() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let flasher = FakeFlasher()
        _ = try await Fixture.scheduler(Fixture.plan(adapters: [("hci0", 1)]), flasher: flasher, log: log, batch: "a.yaml").run(targets: Fixture.targets(2))
        let summary = try await Fixture.scheduler(Fixture.plan(adapters: [("hci0", 1)]), flasher: flasher, log: log, batch: "b.yaml")
            .run(targets: Fixture.targets(3))
        #expect(summary.skipped == 2)
        #expect(summary.done == 1)
        #expect(try await log.devices(batch: "b.yaml").filter { $0.status == .skipped }.count == 2)
        #expect(flasher.counters.withLock { $0.flashes.values.reduce(0, +) } == 3)
    }

    @Test func exportsParseBack() async throws {
        let (log, logURL) = try await Fixture.temporaryDatabase()
        defer { Fixture.remove(logURL) }
        let bad = Fixture.address(2).description
        let flasher = FakeFlasher(scripts: [bad: FakeFlasher.Script(results: [false])])
        _ = try await Fixture.scheduler(Fixture.plan(adapters: [("hci0", 2)], retries: 0), flasher: flasher, log: log).run(targets: Fixture.targets(3))
        let records = try await log.devices()
        let attempts = try await log.attempts()

        // CSV: header + one row per device, the error (with a comma and quotes) intact.
        let csv = BatchExport.csv(records)
        let rows = CSV.parse(csv)
        #expect(rows.first == BatchExport.columns)
        #expect(rows.count == 4)
        let statusColumn = try #require(BatchExport.columns.firstIndex(of: "status"))
        let addressColumn = try #require(BatchExport.columns.firstIndex(of: "address"))
        let errorColumn = try #require(BatchExport.columns.firstIndex(of: "error"))
        let badRow = try #require(rows.first { $0[addressColumn] == bad })
        #expect(badRow[statusColumn] == "failed")
        #expect(badRow[errorColumn] == "remote error: \"wrong hardware version\", extended 0x06")
        #expect(rows.dropFirst().filter { $0[statusColumn] == "done" }.count == 2)
        #expect(BatchExport.csvField("a,\"b\"") == "\"a,\"\"b\"\"\"")

        // JSON: every device with its attempts.
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(BatchExport.json(records, attempts: attempts).utf8)) as? [String: Any])
        let devices = try #require(json["devices"] as? [[String: Any]])
        #expect(devices.count == 3)
        let totals = try #require(json["totals"] as? [String: Int])
        #expect(totals["done"] == 2 && totals["failed"] == 1)
        let first = try #require(devices.first?["record"] as? [String: Any])
        #expect(first["packageSHA256"] as? String == Fixture.package.sha256)
        #expect((devices.first?["attempts"] as? [Any])?.count == 1)

        // JUnit: one testcase per device, one failure.
        let junit = JUnitCounter(BatchExport.junit(records))
        #expect(junit.parsed)
        #expect(junit.testcases == 3)
        #expect(junit.failures == 1)
        #expect(junit.suiteAttributes["tests"] == "3")
        #expect(junit.suiteAttributes["failures"] == "1")
        #expect(BatchExport.escape("<a & \"b\">") == "&lt;a &amp; &quot;b&quot;&gt;")
    }
}

/// RFC 4180 reader for the test (quoted fields, doubled quotes, CRLF).
enum CSV {
    static func parse(_ text: String) -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var field = ""
        var quoted = false
        var iterator = Array(text).makeIterator()
        var pending: Character? = nil
        while let c = pending ?? iterator.next() {
            pending = nil
            if quoted {
                if c == "\"" {
                    if let next = iterator.next() {
                        if next == "\"" { field.append("\"") } else {
                            quoted = false
                            pending = next
                        }
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(c)
                }
            } else if c == "\"" {
                quoted = true
            } else if c == "," {
                row.append(field)
                field = ""
            } else if c == "\r\n" || c == "\n" {
                row.append(field)
                rows.append(row)
                row = []
                field = ""
            } else {
                field.append(c)
            }
        }
        return rows
    }
}

/// Counts JUnit elements with Foundation's XML parser.
final class JUnitCounter: NSObject, XMLParserDelegate {
    var testcases = 0
    var failures = 0
    var suiteAttributes: [String: String] = [:]
    var parsed = false

    init(_ xml: String) {
        super.init()
        let parser = XMLParser(data: Data(xml.utf8))
        parser.delegate = self
        parsed = parser.parse()
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String]) {
        switch name {
        case "testcase": testcases += 1
        case "failure": failures += 1
        case "testsuite": suiteAttributes = attributes
        default: break
        }
    }
}
