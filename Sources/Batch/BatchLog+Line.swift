import Crypto
import Foundation

/// Who runs a station of the line (`stations`).
public struct StationInfo: Sendable, Equatable {
    /// Unique in the line (`--station`, default the host name).
    public var name: String
    public var host: String
    public var pid: Int
    /// The station's adapters as `label×connections`, comma-separated.
    public var adapters: String
    /// ``PlanHash`` of the station's plan: every live station of a line runs the same classes and packages.
    public var planHash: String
    /// How long a claim and the station's liveness last without a heartbeat.
    public var lease: Double

    public init(name: String, host: String, pid: Int, adapters: String, planHash: String, lease: Double) {
        self.name = name
        self.host = host
        self.pid = pid
        self.adapters = adapters
        self.planHash = planHash
        self.lease = lease
    }
}

/// The claims, leases and heartbeats of a line of stations (docs/batch.md, "A line of stations").
///
/// A device is claimed by one station at a time: the claim (`devices.station`, `devices.lease_until`) is taken in a
/// write transaction that locks the chosen row (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so two stations never wait
/// for or take the same row; SQLite's `BEGIN IMMEDIATE` admits one writer at a time). Each heartbeat renews the
/// station's leases; a lease that runs out (the station was killed, its cable pulled) makes the device claimable
/// again, and its open attempt is closed as `interrupted` by the station that takes it over.
extension BatchLog {
    /// Registers the station and starts its run of `batch`.
    ///
    /// Refuses a name that a live station holds (`stationNameTaken`: its heartbeat is fresh and, on this host, its
    /// process runs) and a plan that differs from the plan of the line's live stations (`planDiffers`). What an
    /// earlier instance of this station left open is closed (`interrupted`) and put back (`pending`). When no other
    /// station is live, this run starts a new round: devices that failed (and with `force`, every device) become
    /// pending again with a fresh retry budget. Returns the run id.
    public func startRun(
        batch: String, station: StationInfo, force: Bool, at date: Date, isRunning: @escaping @Sendable (Int) -> Bool = { _ in true }
    ) async throws(BatchLogError) -> Int64 {
        try await write { s in
            let now = Self.timestamp(date)
            let nowMS = Self.milliseconds(date)
            let others = try await Self.checkStation(s, batch: batch, station: station, nowMS: nowMS, isRunning: isRunning)
            try await s.execute(
                """
                INSERT INTO lines (batch, plan_hash, updated_at) VALUES (?, ?, ?)
                ON CONFLICT(batch) DO UPDATE SET plan_hash = excluded.plan_hash, updated_at = excluded.updated_at
                """, .text(batch), .text(station.planHash), .text(now))
            try await s.execute(
                """
                INSERT INTO stations (name, batch, host, pid, adapters, plan_hash, started_at, heartbeat_at, lease_ms, state)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running')
                ON CONFLICT(name) DO UPDATE SET batch = excluded.batch, host = excluded.host, pid = excluded.pid,
                    adapters = excluded.adapters, plan_hash = excluded.plan_hash, started_at = excluded.started_at,
                    heartbeat_at = excluded.heartbeat_at, lease_ms = excluded.lease_ms, state = 'running'
                """, .text(station.name), .text(batch), .text(station.host), .int(station.pid), .text(station.adapters),
                .text(station.planHash), .text(now), .integer(nowMS), .integer(Int64(station.lease * 1000)))
            // What an earlier instance of this station (or a log without stations) left open.
            try await s.execute(
                """
                UPDATE attempts SET result = 'interrupted', finished_at = ?,
                    error = COALESCE(error, 'the batch stopped before this attempt ended (crash or kill)')
                WHERE batch = ? AND result = 'running' AND (station IS NULL OR station = ?)
                """, .text(now), .text(batch), .text(station.name))
            try await s.execute(
                "UPDATE runs SET result = 'interrupted', finished_at = ? WHERE batch = ? AND result = 'running' AND (station IS NULL OR station = ?)",
                .text(now), .text(batch), .text(station.name))
            try await s.execute(
                """
                UPDATE devices SET status = 'pending', station = NULL, lease_until = NULL, stage = NULL
                WHERE batch = ? AND status = 'running' AND (station IS NULL OR station = ?)
                """, .text(batch), .text(station.name))
            if others.isEmpty {
                let statuses = force ? "('failed', 'done', 'skipped')" : "('failed')"
                try await s.execute("UPDATE devices SET status = 'pending', tries = 0 WHERE batch = ? AND status IN \(statuses)", .text(batch))
                try await s.execute("UPDATE devices SET tries = 0 WHERE batch = ? AND status = 'pending'", .text(batch))
            }
            let rows = try await s.rows(
                "INSERT INTO runs (batch, started_at, force, station) VALUES (?, ?, ?, ?) RETURNING id", .text(batch), .text(now),
                .int(force ? 1 : 0), .text(station.name))
            guard let id = rows.first?.int64("id") else { throw BatchLogError(.write, "no run id") }
            return id
        }
    }

    /// Checks, without writing, that `station` may join the line: its name is not a live station's and its plan is
    /// the line's. The CLI calls it before scanning, so a conflict is reported at once.
    public func checkStation(batch: String, station: StationInfo, at date: Date, isRunning: @escaping @Sendable (Int) -> Bool) async throws(BatchLogError) {
        _ = try await read { s in
            try await Self.checkStation(s, batch: batch, station: station, nowMS: Self.milliseconds(date), isRunning: isRunning).count
        }
    }

    /// The line's other live stations; throws `stationNameTaken` or `planDiffers`.
    static func checkStation(_ s: any SQLSession, batch: String, station: StationInfo, nowMS: Int64, isRunning: (Int) -> Bool) async throws -> [SQLRow] {
        if let existing = try await s.row("SELECT * FROM stations WHERE name = ?", .text(station.name)),
            Self.isAlive(existing, at: nowMS), existing.string("state") == "running"
        {
            let sameHost = existing.string("host") == station.host
            let pid = existing.int("pid") ?? 0
            if !sameHost || (pid != station.pid && isRunning(pid)) {
                throw BatchLogError(
                    .stationNameTaken,
                    "station name '\(station.name)' is in use by a live station (host \(existing.string("host") ?? "?"), pid \(pid)); "
                        + "give each station its own --station NAME")
            }
        }
        let others = try await s.rows(
            "SELECT * FROM stations WHERE batch = ? AND name <> ? AND state = 'running' AND heartbeat_at + lease_ms >= ?",
            .text(batch), .text(station.name), .integer(nowMS))
        if let line = try await s.row("SELECT plan_hash FROM lines WHERE batch = ?", .text(batch)), !others.isEmpty,
            line.string("plan_hash") != station.planHash
        {
            let names = others.compactMap { $0.string("name") }.joined(separator: ", ")
            throw BatchLogError(
                .planDiffers,
                "this plan differs from the line's (classes and packages; live stations: \(names)); run the line's plan or stop those stations first")
        }
        return others
    }

    static func isAlive(_ station: SQLRow, at nowMS: Int64) -> Bool {
        (station.int64("heartbeat_at") ?? 0) + (station.int64("lease_ms") ?? 0) >= nowMS
    }

    /// Claims the next device of `batch` for `station`: the first pending one in queue order, or one whose claim
    /// expired (its station stopped renewing it; that station's open attempt is closed as interrupted). Only
    /// devices of `classes` (the plan's). Nil when none is claimable now.
    public func claimNext(batch: String, station: String, classes: [String], lease: Double, at date: Date) async throws(BatchLogError)
        -> DeviceRecord?
    {
        let lock = database.dialect.lockForClaim
        return try await write { s in
            let nowMS = Self.milliseconds(date)
            let classList = classes.map { _ in "?" }.joined(separator: ", ")
            guard !classes.isEmpty,
                let chosen = try await s.rows(
                    """
                    SELECT address, station FROM devices
                    WHERE batch = ? AND class IN (\(classList)) AND (status = 'pending'
                        OR (status = 'running' AND station <> ? AND (lease_until IS NULL OR lease_until < ?)))
                    ORDER BY queue, address LIMIT 1\(lock)
                    """, [.text(batch)] + classes.map { .text($0) } + [.text(station), .integer(nowMS)]
                ).first, let address = chosen.string("address")
            else { return nil }
            let now = Self.timestamp(date)
            if let previous = chosen.string("station"), previous != station {
                try await s.execute(
                    """
                    UPDATE attempts SET result = 'interrupted', finished_at = ?,
                        error = COALESCE(error, 'station ' || ? || ' stopped renewing its claim during this attempt (lease expired)')
                    WHERE batch = ? AND address = ? AND result = 'running'
                    """, .text(now), .text(previous), .text(batch), .text(address))
            }
            try await s.execute(
                """
                UPDATE devices SET status = 'running', station = ?, lease_until = ?, stage = 'claimed', progress_bytes = 0,
                    progress_total = 0, updated_at = ? WHERE batch = ? AND address = ?
                """, .text(station), .integer(nowMS + Int64(lease * 1000)), .text(now), .text(batch), .text(address))
            return try await s.row("SELECT * FROM devices WHERE batch = ? AND address = ?", .text(batch), .text(address)).map(DeviceRecord.init(row:))
        }
    }

    /// Devices of `batch` (of `classes`) not final: pending, or claimed by any station.
    public func remaining(batch: String, classes: [String]) async throws(BatchLogError) -> Int {
        try await read { s in
            let classList = classes.map { _ in "?" }.joined(separator: ", ")
            guard !classes.isEmpty else { return 0 }
            return try await s.row(
                "SELECT COUNT(*) AS n FROM devices WHERE batch = ? AND class IN (\(classList)) AND status IN ('pending', 'running')",
                [.text(batch)] + classes.map { .text($0) })?.int("n") ?? 0
        }
    }

    /// Renews the station's heartbeat and the leases of the devices it holds, and stores their live progress.
    /// Returns the addresses of `holding` that the station no longer holds (another station took them over after
    /// this station's lease ran out).
    @discardableResult
    public func heartbeat(
        batch: String, station: String, lease: Double, progress: [String: DeviceProgress], at date: Date
    ) async throws(BatchLogError) -> Set<String> {
        try await write { s in
            let nowMS = Self.milliseconds(date)
            try await s.execute("UPDATE stations SET heartbeat_at = ? WHERE name = ?", .integer(nowMS), .text(station))
            try await s.execute(
                "UPDATE devices SET lease_until = ? WHERE batch = ? AND station = ? AND status = 'running'",
                .integer(nowMS + Int64(lease * 1000)), .text(batch), .text(station))
            for (address, value) in progress.sorted(by: { $0.key < $1.key }) {
                try await s.execute(
                    "UPDATE devices SET stage = ?, progress_bytes = ?, progress_total = ? WHERE batch = ? AND address = ? AND station = ?",
                    .text(value.stage), .int(value.bytes), .int(value.total), .text(batch), .text(address), .text(station))
            }
            let held = Set(
                try await s.rows("SELECT address FROM devices WHERE batch = ? AND station = ? AND status = 'running'", .text(batch), .text(station))
                    .compactMap { $0.string("address") })
            return Set(progress.keys).subtracting(held)
        }
    }

    // MARK: - Attempts

    /// Opens an attempt (result `running`) and marks the device `running` on `adapter`. Returns the attempt's id and
    /// its number (1 for the device's first attempt in this batch, across runs and stations).
    public func beginAttempt(run: Int64, batch: String, address: String, adapter: String, station: String? = nil, at date: Date)
        async throws(BatchLogError) -> (id: Int64, number: Int)
    {
        let pair: [Int64] = try await write { s in
            let number = (try await s.row("SELECT COUNT(*) AS n FROM attempts WHERE batch = ? AND address = ?", .text(batch), .text(address))?.int64("n") ?? 0) + 1
            let device = try await s.row("SELECT name, package_sha256 FROM devices WHERE batch = ? AND address = ?", .text(batch), .text(address))
            let now = Self.timestamp(date)
            let inserted = try await s.rows(
                """
                INSERT INTO attempts (run_id, batch, address, number, name, adapter, package_sha256, started_at, station)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """, .integer(run), .text(batch), .text(address), .integer(number), .text(device?.string("name")), .text(adapter),
                .text(device?.string("package_sha256") ?? ""), .text(now), .text(station))
            guard let id = inserted.first?.int64("id") else { throw BatchLogError(.write, "no attempt id") }
            try await s.execute(
                """
                UPDATE devices SET status = 'running', adapter = ?, run_id = ?, attempts = ?, tries = tries + 1, updated_at = ?,
                    station = COALESCE(?, station) WHERE batch = ? AND address = ?
                """, .text(adapter), .integer(run), .integer(number), .text(now), .text(station), .text(batch), .text(address))
            return [id, number]
        }
        return (pair[0], Int(pair[1]))
    }

    /// Closes an attempt; with `final`, also writes the device's final status (one transaction). Without, the device
    /// goes back to the end of the queue, unclaimed; with `keepPlace` (the adapter had no link for it: back-pressure,
    /// not the device's failure) it keeps its place in the queue and the attempt does not count against its retries.
    public func endAttempt(
        _ id: Int64, batch: String, address: String, outcome: AttemptOutcome, final: DeviceStatus?, keepPlace: Bool = false,
        at date: Date
    ) async throws(BatchLogError) {
        try await write { s in
            let now = Self.timestamp(date)
            try await s.execute(
                """
                UPDATE attempts SET finished_at = ?, result = ?, error = ?, exit_code = ?, duration = ?, bytes = ?,
                    resends = ?, version_before = ?, version_after = ?, name = COALESCE(?, name)
                WHERE id = ?
                """, .text(now), .text(outcome.result.rawValue), .text(outcome.error), .integer(outcome.exitCode.map { Int64($0) }),
                .real(outcome.duration), .int(outcome.bytes), .int(outcome.resends), .uint(outcome.versionBefore),
                .uint(outcome.versionAfter), .text(outcome.name), .integer(id))
            let status = final ?? .pending
            try await s.execute(
                """
                UPDATE devices SET status = ?, error = ?, exit_code = ?, duration = duration + ?, bytes = bytes + ?,
                    resends = resends + ?, version_before = ?, version_after = ?, name = COALESCE(?, name), updated_at = ?,
                    lease_until = NULL, stage = NULL, finished_at = ?,
                    queue = CASE WHEN ? = 1 THEN queue ELSE (SELECT COALESCE(MAX(queue), 0) + 1 FROM devices WHERE batch = ?) END
                WHERE batch = ? AND address = ?
                """, .text(status.rawValue), .text(outcome.error), .integer(outcome.exitCode.map { Int64($0) }), .real(outcome.duration),
                .int(outcome.bytes), .int(outcome.resends), .uint(outcome.versionBefore), .uint(outcome.versionAfter),
                .text(outcome.name), .text(now), .text(final == nil ? nil : now), .int(final == nil && !keepPlace ? 0 : 1),
                .text(batch), .text(batch), .text(address))
            if final == nil {
                try await s.execute("UPDATE devices SET station = NULL WHERE batch = ? AND address = ?", .text(batch), .text(address))
            }
            if final == nil, keepPlace {
                try await s.execute(
                    // Portable SQL: SQLite has a scalar MAX(a, b), PostgreSQL only GREATEST (a station on the line failed with
                    // "function max(bigint, integer) does not exist").
                    "UPDATE devices SET tries = CASE WHEN tries > 0 THEN tries - 1 ELSE 0 END WHERE batch = ? AND address = ?", .text(batch), .text(address))
            }
        }
    }

    // MARK: - Journals

    /// The journal a station saved for this device and package (the content of its journal file), if any.
    public func journal(address: String, packageSHA256: String) async throws(BatchLogError) -> String? {
        try await read { s in
            try await s.row("SELECT content FROM journals WHERE address = ? AND package_sha256 = ?", .text(address), .text(packageSHA256))?
                .string("content")
        }
    }

    /// Stores a device's journal (nil removes it).
    public func saveJournal(address: String, packageSHA256: String, content: String?, station: String, at date: Date) async throws(BatchLogError) {
        try await write { s in
            guard let content else {
                try await s.execute("DELETE FROM journals WHERE address = ? AND package_sha256 = ?", .text(address), .text(packageSHA256))
                return
            }
            try await s.execute(
                """
                INSERT INTO journals (address, package_sha256, content, station, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(address, package_sha256) DO UPDATE SET content = excluded.content, station = excluded.station,
                    updated_at = excluded.updated_at
                """, .text(address), .text(packageSHA256), .text(content), .text(station), .text(Self.timestamp(date)))
        }
    }
}

/// The line's identity of a plan: SHA-256 over its classes and their packages' SHA-256, sorted by class.
public enum PlanHash {
    public static func of(_ packages: [String: PackageInfo]) -> String {
        let text = packages.keys.sorted().map { "\($0)=\(packages[$0]?.sha256 ?? "")" }.joined(separator: "\n")
        return SHA256.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
