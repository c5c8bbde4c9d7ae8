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
/// again, and its open attempt is closed as `interrupted` by the station that takes it over. What a station writes
/// about a device afterwards is refused (BatchLog+Attempts.swift: the claim fences every write).
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
            try await Self.closeInterrupted(
                s, batch: batch, condition: "(a.station IS NULL OR a.station = ?)", [.text(station.name)],
                error: "the batch stopped before this attempt ended (crash or kill)", at: date)
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
                try await Self.closeInterrupted(
                    s, batch: batch, condition: "a.address = ?", [.text(address)],
                    error: "station \(previous) stopped renewing its claim during this attempt (lease expired)", at: date)
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
}

/// The line's identity of a plan: SHA-256 over its classes and their packages' SHA-256, sorted by class.
public enum PlanHash {
    public static func of(_ packages: [String: PackageInfo]) -> String {
        let text = packages.keys.sorted().map { "\($0)=\(packages[$0]?.sha256 ?? "")" }.joined(separator: "\n")
        return SHA256.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
