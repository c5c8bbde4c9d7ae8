import Batch
import Foundation
import LineStore
import Testing

/// The batch log's store rules, run on a real SQLite file and on a real PostgreSQL server: one schema in two
/// dialects, the schema version, claims that never give one device to two stations, leases that expire and are
/// taken over, station names and the line's plan, journals in the store, and the line's snapshot.
enum StoreChecks {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let sha = String(repeating: "ab", count: 32)

    static func station(_ name: String, host: String = "host-a", pid: Int = 100, plan: String = "plan-1", lease: Double = 30) -> StationInfo {
        StationInfo(name: name, host: host, pid: pid, adapters: "hci0×2", planHash: plan, lease: lease)
    }

    static func identity(_ index: Int, name: String? = nil) -> DeviceRecord.Identity {
        DeviceRecord.Identity(
            address: String(format: "C6:05:04:03:00:%02X", index), addressType: "random", name: name ?? "Bracelet-\(index)",
            className: "bracelet", packagePath: "/tmp/app.zip", packageSHA256: sha, targetVersion: 2)
    }

    static func withStore(_ backend: StoreBackend, _ body: (String, BatchLog) async throws -> Void) async throws {
        let (location, remove) = try await backend.fresh()
        do {
            let log = try await BatchLog.open(location: location)
            do {
                try await body(location, log)
            } catch {
                // Closed on failure too: a PostgreSQL connection dropped unclosed ends the test process (PostgresNIO's
                // deinit precondition) instead of failing this one check.
                await log.close()
                throw error
            }
            await log.close()
        } catch {
            await remove()
            throw error
        }
        await remove()
    }

    static func migratesToTheCurrentVersion(_ backend: StoreBackend) async throws {
        try await withStore(backend) { location, log in
            #expect(try await log.schemaVersion() == LineSchema.current)
            let again = try await BatchLog.open(location: location)
            #expect(try await again.schemaVersion() == LineSchema.current)
            await again.close()
        }
    }

    /// A database of a newer schema version is refused with one clear line, and left as it is.
    static func refusesANewerSchema(_ backend: StoreBackend) async throws {
        try await withStore(backend) { location, log in
            _ = try await log.startRun(batch: "line", station: station("a"), force: false, at: t0)
            try await log.database.transaction(write: true) { s in
                try await s.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 'later')", [.int(LineSchema.current + 1)])
            }
            await #expect(throws: BatchLogError(.newerSchema, "")) { try await BatchLog.open(location: location) }
            do {
                _ = try await BatchLog.open(location: location)
            } catch {
                let reason = (error as? BatchLogError)?.reason ?? ""
                #expect(reason.contains("schema version \(LineSchema.current + 1)"))
                #expect(reason.contains("update bledfu"))
                #expect(!reason.contains("\n"))
            }
        }
    }

    /// Two stations claiming at once (two connections, concurrent tasks) never get the same device, and between
    /// them get every device.
    static func claimsNeverOverlap(_ backend: StoreBackend) async throws {
        try await withStore(backend) { location, log in
            for index in 1...24 { try await log.enroll(batch: "line", device: identity(index), at: t0) }
            let other = try await BatchLog.open(location: location)
            let a = Task { try await claimAll(log, station: "a") }
            let b = Task { try await claimAll(other, station: "b") }
            let (mine, theirs) = (try await a.value, try await b.value)
            await other.close()
            #expect(mine.count + theirs.count == 24)
            #expect(Set(mine).isDisjoint(with: theirs))
            #expect(Set(mine).union(theirs).count == 24)
            let records = try await log.devices(batch: "line")
            #expect(records.allSatisfy { $0.status == .running && ($0.station == "a" || $0.station == "b") })
        }
    }

    static func claimAll(_ log: BatchLog, station: String) async throws -> [String] {
        var claimed: [String] = []
        while let record = try await log.claimNext(batch: "line", station: station, classes: ["bracelet"], lease: 30, at: t0) {
            claimed.append(record.address)
        }
        return claimed
    }

    /// A station stops renewing (killed): once its lease ran out, another station takes the device over, the dead
    /// station's open attempt is closed as interrupted with the cause, and the device keeps one record.
    static func anExpiredLeaseIsTakenOver(_ backend: StoreBackend) async throws {
        try await withStore(backend) { _, log in
            let a = station("a", lease: 10)
            let b = station("b", host: "host-b", lease: 10)
            let runA = try await log.startRun(batch: "line", station: a, force: false, at: t0)
            let runB = try await log.startRun(batch: "line", station: b, force: false, at: t0)
            try await log.enroll(batch: "line", device: identity(1), at: t0)
            let claimed = try #require(try await log.claimNext(batch: "line", station: "a", classes: ["bracelet"], lease: 10, at: t0))
            _ = try await log.beginAttempt(run: runA, batch: "line", address: claimed.address, adapter: "hci0", station: "a", at: t0)
            // Within the lease (renewed by a heartbeat at t0+8) b finds nothing to claim.
            #expect(try await log.heartbeat(batch: "line", station: "a", lease: 10, progress: [:], at: t0 + 8).isEmpty)
            #expect(try await log.claimNext(batch: "line", station: "b", classes: ["bracelet"], lease: 10, at: t0 + 15) == nil)
            #expect(try await log.remaining(batch: "line", classes: ["bracelet"]) == 1)
            // a is killed: no heartbeat after t0+8; at t0+19 its lease (t0+18) has run out.
            let taken = try #require(try await log.claimNext(batch: "line", station: "b", classes: ["bracelet"], lease: 10, at: t0 + 19))
            #expect(taken.address == claimed.address && taken.station == "b")
            let second = try await log.beginAttempt(run: runB, batch: "line", address: taken.address, adapter: "hci1", station: "b", at: t0 + 19)
            #expect(second.number == 2)
            try await log.endAttempt(
                second.id, batch: "line", address: taken.address,
                outcome: AttemptOutcome(result: .done, exitCode: 0, duration: 5, bytes: 1000, versionBefore: 1, versionAfter: 2), final: .done,
                at: t0 + 25)
            let attempts = try await log.attempts(batch: "line")
            #expect(attempts.map(\.result) == [.interrupted, .done])
            #expect(attempts.map(\.station) == ["a", "b"])
            #expect(attempts[0].error?.contains("station a stopped renewing its claim") == true)
            let records = try await log.devices(batch: "line")
            #expect(records.count == 1)
            #expect(records.first?.status == .done && records.first?.station == "b")
            // a's late heartbeat learns that the device is no longer its own.
            let lost = try await log.heartbeat(
                batch: "line", station: "a", lease: 10, progress: [claimed.address: DeviceProgress(stage: "uploading")], at: t0 + 26)
            #expect(lost == [claimed.address])
            try await log.finishRun(runB, station: "b", result: "ok", at: t0 + 30)
        }
    }

    /// Back-pressure (the adapter had no free link, exit 21): the attempt is closed as failed, but the device keeps its
    /// place in the queue and the try is not counted. The SQL is the same in both dialects (a scalar MAX(a, b) is
    /// SQLite's only: PostgreSQL refused it with "function max(bigint, integer) does not exist").
    static func backPressureKeepsThePlace(_ backend: StoreBackend) async throws {
        try await withStore(backend) { _, log in
            let run = try await log.startRun(batch: "line", station: station("a"), force: false, at: t0)
            for index in 1...3 { try await log.enroll(batch: "line", device: identity(index), at: t0) }
            let first = try #require(try await log.claimNext(batch: "line", station: "a", classes: ["bracelet"], lease: 30, at: t0))
            let attempt = try await log.beginAttempt(run: run, batch: "line", address: first.address, adapter: "hci0", station: "a", at: t0)
            try await log.endAttempt(
                attempt.id, batch: "line", address: first.address,
                outcome: AttemptOutcome(result: .failed, exitCode: 21, duration: 0.1, bytes: 0), final: nil, keepPlace: true,
                at: t0 + 1)
            let again = try #require(try await log.claimNext(batch: "line", station: "a", classes: ["bracelet"], lease: 30, at: t0 + 2))
            #expect(again.address == first.address, "the refused device is next again, not at the end of the queue")
            let record = try #require(try await log.devices(batch: "line").first { $0.address == first.address })
            #expect(record.tries == 0, "the refusal did not count as a try")
            #expect(try await log.attempts(batch: "line").map(\.exitCode) == [21])
        }
    }

    /// Two live stations with one name: the second is refused; once the first is silent past its lease (or its
    /// process on this host is gone), the name is free.
    static func stationNamesAreUnique(_ backend: StoreBackend) async throws {
        try await withStore(backend) { _, log in
            _ = try await log.startRun(batch: "line", station: station("s1", host: "host-a", pid: 100, lease: 10), force: false, at: t0)
            let twin = station("s1", host: "host-b", pid: 200, lease: 10)
            await #expect(throws: BatchLogError(.stationNameTaken, "")) {
                try await log.startRun(batch: "line", station: twin, force: false, at: t0 + 1)
            }
            await #expect(throws: BatchLogError(.stationNameTaken, "")) {
                try await log.checkStation(batch: "line", station: twin, at: t0 + 1, isRunning: { _ in true })
            }
            // The same host, another process that still runs: refused; a dead process: the name is free.
            let restarted = station("s1", host: "host-a", pid: 101, lease: 10)
            await #expect(throws: BatchLogError(.stationNameTaken, "")) {
                try await log.startRun(batch: "line", station: restarted, force: false, at: t0 + 2, isRunning: { _ in true })
            }
            _ = try await log.startRun(batch: "line", station: restarted, force: false, at: t0 + 2, isRunning: { $0 != 100 })
            // Silent past its lease: any host may take the name.
            _ = try await log.startRun(batch: "line", station: twin, force: false, at: t0 + 20)
        }
    }

    /// A station whose plan (classes and packages) differs from the live stations' is refused.
    static func aDifferentPlanIsRefused(_ backend: StoreBackend) async throws {
        try await withStore(backend) { _, log in
            let first = try await log.startRun(batch: "line", station: station("a", plan: "plan-1"), force: false, at: t0)
            await #expect(throws: BatchLogError(.planDiffers, "")) {
                try await log.startRun(batch: "line", station: station("b", host: "host-b", plan: "plan-2"), force: false, at: t0 + 1)
            }
            _ = try await log.startRun(batch: "line", station: station("c", host: "host-c", plan: "plan-1"), force: false, at: t0 + 1)
            try await log.finishRun(first, station: "a", result: "ok", at: t0 + 2)
            // Once no station of the old plan is live, a new plan becomes the line's.
            _ = try await log.startRun(batch: "line", station: station("b", host: "host-b", plan: "plan-2"), force: false, at: t0 + 60)
        }
    }

    /// Journals live in the store, written only by the station that holds the device's claim.
    static func journalsLiveInTheStore(_ backend: StoreBackend) async throws {
        try await withStore(backend) { location, log in
            let address = identity(1).address
            _ = try await log.startRun(batch: "line", station: station("a"), force: false, at: t0)
            try await log.enroll(batch: "line", device: identity(1), at: t0)
            #expect(try await log.journal(address: address, packageSHA256: sha) == nil)
            // Not claimed yet: nobody may write its journal.
            await #expect(throws: BatchLogError(.claimLost, "")) {
                try await log.saveJournal(address: address, packageSHA256: sha, content: #"{"journal":0}"#, station: "a", at: t0)
            }
            _ = try #require(try await log.claimNext(batch: "line", station: "a", classes: ["bracelet"], lease: 30, at: t0))
            try await log.saveJournal(address: address, packageSHA256: sha, content: #"{"journal":1}"#, station: "a", at: t0)
            try await log.saveJournal(address: address, packageSHA256: sha, content: #"{"journal":2}"#, station: "a", at: t0)
            let other = try await BatchLog.open(location: location)
            #expect(try await other.journal(address: address, packageSHA256: sha) == #"{"journal":2}"#)
            // b does not hold the claim: its write is refused and a's journal stands.
            await #expect(throws: BatchLogError(.claimLost, "")) {
                try await other.saveJournal(address: address, packageSHA256: sha, content: nil, station: "b", at: t0)
            }
            #expect(try await log.journal(address: address, packageSHA256: sha) == #"{"journal":2}"#)
            try await log.saveJournal(address: address, packageSHA256: sha, content: nil, station: "a", at: t0)
            #expect(try await other.journal(address: address, packageSHA256: sha) == nil)
            await other.close()
        }
    }

    /// Fencing: a station paused past its lease (SIGSTOP, a suspended machine) comes back after another station took
    /// its device over. Its late writes (the attempt's end, a new attempt, its journal) are refused with `claimLost`
    /// and change nothing; its heartbeat reports the device as lost. The taker's interrupted-attempt record carries
    /// the bytes the last heartbeat stored and the time the attempt ran.
    static func aLateStationIsFenced(_ backend: StoreBackend) async throws {
        try await withStore(backend) { _, log in
            let runA = try await log.startRun(batch: "line", station: station("a", lease: 10), force: false, at: t0)
            let runB = try await log.startRun(batch: "line", station: station("b", host: "host-b", lease: 10), force: false, at: t0)
            try await log.enroll(batch: "line", device: identity(1), at: t0)
            let address = try #require(try await log.claimNext(batch: "line", station: "a", classes: ["bracelet"], lease: 10, at: t0)).address
            let first = try await log.beginAttempt(run: runA, batch: "line", address: address, adapter: "hci0", station: "a", at: t0)
            try await log.saveJournal(address: address, packageSHA256: sha, content: #"{"by":"a"}"#, station: "a", at: t0 + 5)
            let progress = DeviceProgress(stage: "uploading", bytes: 4096, total: 20000)
            #expect(try await log.heartbeat(batch: "line", station: "a", lease: 10, progress: [address: progress], at: t0 + 5).isEmpty)
            // a is paused from t0+5: its lease (t0+15) runs out and b takes the device over at t0+19.
            _ = try #require(try await log.claimNext(batch: "line", station: "b", classes: ["bracelet"], lease: 10, at: t0 + 19))
            let second = try await log.beginAttempt(run: runB, batch: "line", address: address, adapter: "hci1", station: "b", at: t0 + 19)
            try await log.saveJournal(address: address, packageSHA256: sha, content: #"{"by":"b"}"#, station: "b", at: t0 + 20)
            // a resumes at t0+21 and ends its attempt as done: refused, nothing changes.
            let late = AttemptOutcome(result: .done, exitCode: 0, duration: 21, bytes: 20000, versionBefore: 1, versionAfter: 2)
            await #expect(throws: BatchLogError(.claimLost, "")) {
                try await log.endAttempt(first.id, batch: "line", address: address, outcome: late, final: .done, station: "a", at: t0 + 21)
            }
            await #expect(throws: BatchLogError(.claimLost, "")) {
                _ = try await log.beginAttempt(run: runA, batch: "line", address: address, adapter: "hci0", station: "a", at: t0 + 21)
            }
            await #expect(throws: BatchLogError(.claimLost, "")) {
                try await log.saveJournal(address: address, packageSHA256: sha, content: #"{"by":"a-late"}"#, station: "a", at: t0 + 21)
            }
            #expect(try await log.journal(address: address, packageSHA256: sha) == #"{"by":"b"}"#)
            #expect(try await log.heartbeat(batch: "line", station: "a", lease: 10, progress: [address: progress], at: t0 + 21) == [address])
            var records = try await log.devices(batch: "line")
            #expect(records.map(\.status) == [.running] && records.map(\.station) == ["b"])
            var attempts = try await log.attempts(batch: "line")
            #expect(attempts.map(\.result) == [.interrupted, .running])
            #expect(attempts.first?.bytes == 4096, "the bytes a's last heartbeat stored")
            #expect(attempts.first?.duration == 19, "from a's start (t0) to b's takeover (t0+19)")
            // b's own end is recorded.
            try await log.endAttempt(
                second.id, batch: "line", address: address,
                outcome: AttemptOutcome(result: .done, exitCode: 0, duration: 6, bytes: 15904, versionBefore: 1, versionAfter: 2), final: .done,
                station: "b", at: t0 + 25)
            records = try await log.devices(batch: "line")
            #expect(records.map(\.status) == [.done] && records.map(\.station) == ["b"])
            #expect(records.first?.bytes == 15904)
            attempts = try await log.attempts(batch: "line")
            #expect(attempts.map(\.result) == [.interrupted, .done])
            #expect(attempts.map(\.station) == ["a", "b"])
            // Ending b's attempt twice is refused too (it is closed).
            await #expect(throws: BatchLogError(.claimLost, "")) {
                try await log.endAttempt(second.id, batch: "line", address: address, outcome: late, final: .failed, station: "b", at: t0 + 26)
            }
        }
    }

    /// The snapshot counts what the tables hold; a hostile name is kept byte for byte (escaping is the page's job).
    static func theSnapshotCountsTheLine(_ backend: StoreBackend) async throws {
        try await withStore(backend) { _, log in
            let run = try await log.startRun(batch: "line", station: station("a"), force: false, at: t0)
            for index in 1...4 { try await log.enroll(batch: "line", device: identity(index, name: index == 4 ? "<script>x</script>" : nil), at: t0) }
            for (index, result) in [(1, AttemptResult.done), (2, .failed)] {
                let claimed = try #require(try await log.claimNext(batch: "line", station: "a", classes: ["bracelet"], lease: 30, at: t0))
                let attempt = try await log.beginAttempt(run: run, batch: "line", address: claimed.address, adapter: "hci0", station: "a", at: t0)
                try await log.endAttempt(
                    attempt.id, batch: "line", address: claimed.address,
                    outcome: AttemptOutcome(result: result, error: result == .failed ? "link lost [exit 43]" : nil, duration: 10),
                    final: result == .done ? .done : .failed, at: t0 + Double(60 * index))
            }
            let running = try #require(try await log.claimNext(batch: "line", station: "a", classes: ["bracelet"], lease: 30, at: t0 + 200))
            try await log.heartbeat(
                batch: "line", station: "a", lease: 30, progress: [running.address: DeviceProgress(stage: "uploading", bytes: 500, total: 1000)],
                at: t0 + 210)
            let snapshot = try await log.snapshot(batch: "line", at: t0 + 220)
            #expect(snapshot.done == 1 && snapshot.failed == 1 && snapshot.running == 1 && snapshot.pending == 1)
            #expect(snapshot.yield == 0.5)
            #expect(snapshot.stations.map(\.name) == ["a"] && snapshot.stations.first?.alive == true)
            #expect(snapshot.inFlight.map(\.percent) == [50])
            #expect(snapshot.failures.first?.error == "link lost [exit 43]")
            #expect(snapshot.overTime.map(\.finished).reduce(0, +) == 2)
            #expect(try await log.devices(batch: "line").contains { $0.name == "<script>x</script>" })
            // Devices per hour: the 2 finished within the window, which is the time since the line started (220 s,
            // between 60 s and an hour).
            #expect(abs(snapshot.devicesPerHour - 2 * 3600 / 220) < 1e-9, "\(snapshot.devicesPerHour)")
            // The JUnit report of what this store holds: one testcase per device, the failure with its cause, the
            // unfinished devices as errors, the markup name escaped.
            let junit = BatchExport.render(try await log.devices(batch: "line"), attempts: try await log.attempts(batch: "line"), as: .junit)
            #expect(junit.contains(#"<testsuites name="bledfu batch" tests="4" failures="1" errors="2">"#), "\(junit)")
            #expect(junit.components(separatedBy: "<testcase ").count - 1 == 4)
            #expect(junit.contains(#"<failure message="link lost [exit 43]""#), "\(junit)")
            #expect(junit.contains("&lt;script&gt;x&lt;/script&gt;") && !junit.contains("<script>"), "\(junit)")
        }
    }
}

@Suite(.timeLimit(.minutes(10))) struct SQLiteStoreTests {
    @Test func migratesToTheCurrentVersion() async throws { try await StoreChecks.migratesToTheCurrentVersion(.sqlite) }
    @Test func refusesANewerSchema() async throws { try await StoreChecks.refusesANewerSchema(.sqlite) }
    @Test func claimsNeverOverlap() async throws { try await StoreChecks.claimsNeverOverlap(.sqlite) }
    @Test func anExpiredLeaseIsTakenOver() async throws { try await StoreChecks.anExpiredLeaseIsTakenOver(.sqlite) }
    @Test func stationNamesAreUnique() async throws { try await StoreChecks.stationNamesAreUnique(.sqlite) }
    @Test func aDifferentPlanIsRefused() async throws { try await StoreChecks.aDifferentPlanIsRefused(.sqlite) }
    @Test func journalsLiveInTheStore() async throws { try await StoreChecks.journalsLiveInTheStore(.sqlite) }
    @Test func aLateStationIsFenced() async throws { try await StoreChecks.aLateStationIsFenced(.sqlite) }
    @Test func theSnapshotCountsTheLine() async throws { try await StoreChecks.theSnapshotCountsTheLine(.sqlite) }
    @Test func backPressureKeepsThePlace() async throws { try await StoreChecks.backPressureKeepsThePlace(.sqlite) }
}

@Suite(
    .enabled(
        if: StoreBackend.postgresEnabled,
        "no PostgreSQL server: set BLEDFU_TEST_POSTGRES_URL (tools/test starts a throwaway cluster and sets it)"),
    .timeLimit(.minutes(10))
)
struct PostgresStoreTests {
    @Test func migratesToTheCurrentVersion() async throws { try await StoreChecks.migratesToTheCurrentVersion(.postgres) }
    @Test func refusesANewerSchema() async throws { try await StoreChecks.refusesANewerSchema(.postgres) }
    @Test func claimsNeverOverlap() async throws { try await StoreChecks.claimsNeverOverlap(.postgres) }
    @Test func anExpiredLeaseIsTakenOver() async throws { try await StoreChecks.anExpiredLeaseIsTakenOver(.postgres) }
    @Test func stationNamesAreUnique() async throws { try await StoreChecks.stationNamesAreUnique(.postgres) }
    @Test func aDifferentPlanIsRefused() async throws { try await StoreChecks.aDifferentPlanIsRefused(.postgres) }
    @Test func journalsLiveInTheStore() async throws { try await StoreChecks.journalsLiveInTheStore(.postgres) }
    @Test func aLateStationIsFenced() async throws { try await StoreChecks.aLateStationIsFenced(.postgres) }
    @Test func theSnapshotCountsTheLine() async throws { try await StoreChecks.theSnapshotCountsTheLine(.postgres) }
    @Test func backPressureKeepsThePlace() async throws { try await StoreChecks.backPressureKeepsThePlace(.postgres) }

    /// A station stopped inside a transaction must not hold its row locks (and so its devices) for as long as it
    /// stays stopped: every session of the store asks the server to end a transaction idle for 10 s.
    @Test func aStoppedStationsTransactionIsEndedByTheServer() async throws {
        let (location, remove) = try await StoreBackend.postgres.fresh()
        let database = try await PostgresLineDatabase.connect(try PostgresURL(location))
        let rows = try await database.transaction(write: false) { session in
            try await session.rows("SHOW idle_in_transaction_session_timeout", [])
        }
        await database.close()
        await remove()
        guard case .text(let value)? = rows.first?.values["idle_in_transaction_session_timeout"] else {
            Issue.record("no idle_in_transaction_session_timeout row: \(rows)")
            return
        }
        #expect(value == PostgresLineDatabase.idleTransactionLimit)
    }

    /// A database dropped without `close()` ends its session (it trapped in PostgresNIO's debug check before, and
    /// the server kept the session): its backend leaves `pg_stat_activity`.
    @Test func aDatabaseDroppedWithoutCloseEndsItsSession() async throws {
        let (location, remove) = try await StoreBackend.postgres.fresh()
        let url = try PostgresURL(location)
        let observer = try await PostgresLineDatabase.connect(url)
        var pid: Int64?
        do {
            let dropped = try await PostgresLineDatabase.connect(url)
            let rows = try await dropped.transaction(write: false) { session in
                try await session.rows("SELECT pg_backend_pid() AS pid", [])
            }
            if case .integer(let value?)? = rows.first?.values["pid"] { pid = value }
        }
        #expect(pid != nil)
        let backend = pid ?? 0
        var sessions = -1
        for _ in 0..<600 {
            let rows = try await observer.transaction(write: false) { session in
                try await session.rows("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1", [.integer(backend)])
            }
            if case .integer(let count?)? = rows.first?.values["n"] { sessions = Int(count) }
            if sessions == 0 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        await observer.close()
        await remove()
        #expect(sessions == 0)
    }
}
