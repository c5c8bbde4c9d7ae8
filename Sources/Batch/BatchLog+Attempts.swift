import Foundation

/// Attempts and journals, fenced by the claim (docs/batch.md, "A line of stations"). A station that stopped renewing
/// its leases (killed, or paused with SIGSTOP or a suspended machine) may come back after another station took its
/// devices over: every write it makes about such a device is refused with `claimLost` and changes nothing, so the
/// taker's record stands. The device's row is locked before its attempt's row, in the order a claim locks them.
extension BatchLog {
    /// Opens an attempt (result `running`) and marks the device `running` on `adapter`. Returns the attempt's id and
    /// its number (1 for the device's first attempt in this batch, across runs and stations). With `station`, the
    /// station must still hold the device's claim (else `claimLost`, nothing written).
    public func beginAttempt(run: Int64, batch: String, address: String, adapter: String, station: String? = nil, at date: Date)
        async throws(BatchLogError) -> (id: Int64, number: Int)
    {
        let lock = database.dialect.lockRow
        let pair: [Int64] = try await write { s in
            if let station { try await Self.requireClaim(s, batch: batch, address: address, station: station, lock: lock) }
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
    ///
    /// With `station`, the station must still hold the device's claim and the attempt must still be open: a station
    /// whose device another station took over (which closed this attempt as `interrupted`) gets `claimLost`, and
    /// neither the attempt nor the device changes.
    public func endAttempt(
        _ id: Int64, batch: String, address: String, outcome: AttemptOutcome, final: DeviceStatus?, keepPlace: Bool = false,
        station: String? = nil, at date: Date
    ) async throws(BatchLogError) {
        let lock = database.dialect.lockRow
        try await write { s in
            if let station {
                try await Self.requireClaim(s, batch: batch, address: address, station: station, lock: lock)
                let result = try await s.row("SELECT result FROM attempts WHERE id = ?\(lock)", .integer(id))?.string("result")
                guard result == AttemptResult.running.rawValue else {
                    throw BatchLogError(.claimLost, "\(address): attempt \(id) was already closed (\(result ?? "missing")); nothing recorded")
                }
            }
            try await Self.closeAttempt(s, id, outcome: outcome, at: date)
            try await Self.settleDevice(s, batch: batch, address: address, outcome: outcome, final: final, keepPlace: keepPlace, at: date)
        }
    }

    static func closeAttempt(_ s: any SQLSession, _ id: Int64, outcome: AttemptOutcome, at date: Date) async throws {
        try await s.execute(
            """
            UPDATE attempts SET finished_at = ?, result = ?, error = ?, exit_code = ?, duration = ?, bytes = ?,
                resends = ?, version_before = ?, version_after = ?, name = COALESCE(?, name)
            WHERE id = ?
            """, .text(timestamp(date)), .text(outcome.result.rawValue), .text(outcome.error), .integer(outcome.exitCode.map { Int64($0) }),
            .real(outcome.duration), .int(outcome.bytes), .int(outcome.resends), .uint(outcome.versionBefore),
            .uint(outcome.versionAfter), .text(outcome.name), .integer(id))
    }

    static func settleDevice(
        _ s: any SQLSession, batch: String, address: String, outcome: AttemptOutcome, final: DeviceStatus?, keepPlace: Bool, at date: Date
    ) async throws {
        let now = timestamp(date)
        let status = final ?? .pending
        try await s.execute(
            """
            UPDATE devices SET status = ?, error = ?, exit_code = ?, duration = duration + ?, bytes = bytes + ?,
                resends = resends + ?, version_before = ?,
                version_after = ?, name = COALESCE(?, name), updated_at = ?,
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

    /// Throws `claimLost` unless `station` holds the claim of the running device (locking its row on PostgreSQL).
    static func requireClaim(_ s: any SQLSession, batch: String, address: String, station: String, lock: String) async throws {
        let device = try await s.row("SELECT station, status FROM devices WHERE batch = ? AND address = ?\(lock)", .text(batch), .text(address))
        guard let device, device.string("station") == station, device.string("status") == DeviceStatus.running.rawValue else {
            throw BatchLogError(
                .claimLost,
                "\(address): station \(station) no longer holds this device (now \(device?.string("station") ?? "unclaimed"), "
                    + "\(device?.string("status") ?? "unknown")); nothing recorded")
        }
    }

    /// Closes the open attempts that `condition` selects as `interrupted` with `error` (unless they have one), the
    /// bytes the device's last heartbeat stored (`progress_bytes`: the position reached, resumed bytes included) and
    /// the time since each started. Runs before the device's progress is reset.
    static func closeInterrupted(
        _ s: any SQLSession, batch: String, condition: String, _ arguments: [SQLValue], error: String, at date: Date
    ) async throws {
        let open = try await s.rows(
            """
            SELECT a.id AS id, a.started_at AS started_at, COALESCE(d.progress_bytes, 0) AS progress_bytes FROM attempts a
            LEFT JOIN devices d ON d.batch = a.batch AND d.address = a.address
            WHERE a.batch = ? AND a.result = 'running' AND \(condition) ORDER BY a.id
            """, [.text(batch)] + arguments)
        for attempt in open {
            guard let id = attempt.int64("id") else { continue }
            let started = attempt.string("started_at").flatMap(Self.date(fromTimestamp:))
            try await s.execute(
                """
                UPDATE attempts SET result = 'interrupted', finished_at = ?, error = COALESCE(error, ?), bytes = ?, duration = ?
                WHERE id = ?
                """, .text(timestamp(date)), .text(error), .int(attempt.int("progress_bytes") ?? 0),
                .real(started.map { max(0, date.timeIntervalSince($0)) }), .integer(id))
        }
    }

    /// The date a ``timestamp(_:)`` wrote.
    static func date(fromTimestamp text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    // MARK: - Journals

    /// The journal a station saved for this device and package (the content of its journal file), if any.
    public func journal(address: String, packageSHA256: String) async throws(BatchLogError) -> String? {
        try await read { s in
            try await s.row("SELECT content FROM journals WHERE address = ? AND package_sha256 = ?", .text(address), .text(packageSHA256))?
                .string("content")
        }
    }

    /// Stores a device's journal (nil removes it). Only while `station` holds a running claim on the device:
    /// otherwise `claimLost` (a late station never overwrites or removes the journal of the station that took over).
    public func saveJournal(address: String, packageSHA256: String, content: String?, station: String, at date: Date) async throws(BatchLogError) {
        try await write { s in
            guard
                try await s.row(
                    "SELECT address FROM devices WHERE address = ? AND station = ? AND status = 'running'", .text(address), .text(station))
                    != nil
            else {
                throw BatchLogError(.claimLost, "\(address): station \(station) no longer holds this device; its journal is not stored")
            }
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
