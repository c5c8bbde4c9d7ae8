import Foundation
import GRDB

/// The line's record (docs/batch.md, "Database"): an SQLite file in WAL mode with one row per attempt
/// (`attempts`), one final row per device and batch (`devices`), and one row per run of the command (`runs`).
///
/// Every state change is its own committed transaction, so a crash (kill -9, power loss) loses at most the change
/// under way: a run that ended without `finishRun` leaves `running` rows, which the next run of the same batch
/// closes as `interrupted` (attempts) and takes up again (devices).
public final class BatchLog: Sendable {
    let pool: DatabasePool
    public let path: String

    /// Opens (creating when needed) the database at `path`.
    public init(path: String) throws(BatchLogError) {
        self.path = path
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch {
            throw BatchLogError(.open, "cannot open the batch database \(path): \(error)")
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE runs (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        batch TEXT NOT NULL,
                        started_at TEXT NOT NULL,
                        finished_at TEXT,
                        result TEXT NOT NULL DEFAULT 'running',
                        force INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE devices (
                        batch TEXT NOT NULL,
                        address TEXT NOT NULL,
                        address_type TEXT NOT NULL,
                        name TEXT,
                        class TEXT NOT NULL,
                        package_path TEXT NOT NULL,
                        package_sha256 TEXT NOT NULL,
                        target_version INTEGER,
                        version_before INTEGER,
                        version_after INTEGER,
                        status TEXT NOT NULL,
                        error TEXT,
                        exit_code INTEGER,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        duration REAL NOT NULL DEFAULT 0,
                        bytes INTEGER NOT NULL DEFAULT 0,
                        resends INTEGER NOT NULL DEFAULT 0,
                        adapter TEXT,
                        run_id INTEGER,
                        updated_at TEXT NOT NULL,
                        PRIMARY KEY (batch, address)
                    );
                    CREATE TABLE attempts (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        run_id INTEGER NOT NULL REFERENCES runs(id),
                        batch TEXT NOT NULL,
                        address TEXT NOT NULL,
                        number INTEGER NOT NULL,
                        name TEXT,
                        adapter TEXT NOT NULL,
                        package_sha256 TEXT NOT NULL,
                        version_before INTEGER,
                        version_after INTEGER,
                        started_at TEXT NOT NULL,
                        finished_at TEXT,
                        result TEXT NOT NULL DEFAULT 'running',
                        error TEXT,
                        exit_code INTEGER,
                        duration REAL,
                        bytes INTEGER NOT NULL DEFAULT 0,
                        resends INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX attempts_device ON attempts(batch, address);
                    """)
        }
        return migrator
    }

    /// The journal mode SQLite reports ("wal").
    public func journalMode() throws(BatchLogError) -> String {
        try read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }

    // MARK: - Runs

    /// Starts a run of `batch`: attempts a crashed earlier run left open become `interrupted`, devices it left
    /// `running` go back to `pending`. Returns the run id.
    public func startRun(batch: String, force: Bool, at date: Date) throws(BatchLogError) -> Int64 {
        try write { db in
            let now = Self.timestamp(date)
            try db.execute(
                sql: """
                    UPDATE attempts SET result = 'interrupted', finished_at = ?,
                        error = COALESCE(error, 'the batch stopped before this attempt ended (crash or kill)')
                    WHERE batch = ? AND result = 'running'
                    """, arguments: [now, batch])
            try db.execute(sql: "UPDATE runs SET result = 'interrupted', finished_at = ? WHERE batch = ? AND result = 'running'", arguments: [now, batch])
            try db.execute(sql: "UPDATE devices SET status = 'pending' WHERE batch = ? AND status = 'running'", arguments: [batch])
            try db.execute(sql: "INSERT INTO runs (batch, started_at, force) VALUES (?, ?, ?)", arguments: [batch, now, force])
            return db.lastInsertedRowID
        }
    }

    public func finishRun(_ run: Int64, result: String, at date: Date) throws(BatchLogError) {
        try write { db in
            try db.execute(sql: "UPDATE runs SET result = ?, finished_at = ? WHERE id = ?", arguments: [result, Self.timestamp(date), run])
        }
    }

    // MARK: - Devices

    /// Adds the device as `pending` unless the batch already has it; returns its current record.
    @discardableResult
    public func enroll(batch: String, device: DeviceRecord.Identity, at date: Date) throws(BatchLogError) -> DeviceRecord {
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO devices (batch, address, address_type, name, class, package_path, package_sha256,
                        target_version, status, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)
                    ON CONFLICT(batch, address) DO UPDATE SET
                        name = COALESCE(excluded.name, devices.name),
                        class = excluded.class, package_path = excluded.package_path,
                        package_sha256 = excluded.package_sha256, target_version = excluded.target_version
                    """,
                arguments: [
                    batch, device.address, device.addressType, device.name, device.className, device.packagePath,
                    device.packageSHA256, device.targetVersion.map { Int64($0) }, Self.timestamp(date),
                ])
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE batch = ? AND address = ?", arguments: [batch, device.address]) else {
                throw BatchLogError(.write, "device \(device.address) vanished")
            }
            return DeviceRecord(row: row)
        }
    }

    /// The record that says this device already runs this package (done or skipped at the target version), in any
    /// batch of this database.
    public func completed(address: String, packageSHA256: String, targetVersion: UInt32?) throws(BatchLogError) -> DeviceRecord? {
        try read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM devices WHERE address = ? AND status IN ('done', 'skipped') ORDER BY updated_at DESC",
                arguments: [address])
            return rows.map(DeviceRecord.init(row:)).first { record in
                if record.status == .done, record.packageSHA256 == packageSHA256 { return true }
                if let target = targetVersion, let after = record.versionAfter, after >= target { return true }
                return false
            }
        }
    }

    /// Devices of `batch` not yet final (pending or running), e.g. left by a crashed run.
    public func unfinished(batch: String) throws(BatchLogError) -> [DeviceRecord] {
        try devices(batch: batch).filter { $0.status == .pending || $0.status == .running }
    }

    /// Every device record of `batch` (nil: of every batch), in address order.
    public func devices(batch: String? = nil) throws(BatchLogError) -> [DeviceRecord] {
        try read { db in
            let rows: [Row]
            if let batch {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM devices WHERE batch = ? ORDER BY address", arguments: [batch])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY batch, address")
            }
            return rows.map(DeviceRecord.init(row:))
        }
    }

    /// Every attempt of `batch` (nil: of every batch), oldest first.
    public func attempts(batch: String? = nil) throws(BatchLogError) -> [AttemptRecord] {
        try read { db in
            let rows: [Row]
            if let batch {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM attempts WHERE batch = ? ORDER BY id", arguments: [batch])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM attempts ORDER BY id")
            }
            return rows.map(AttemptRecord.init(row:))
        }
    }

    /// Names of the batches in the database.
    public func batches() throws(BatchLogError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "SELECT DISTINCT batch FROM devices ORDER BY batch") }
    }

    // MARK: - Attempts

    /// Opens an attempt (result `running`) and marks the device `running`. Returns the attempt's id and its number
    /// (1 for the device's first attempt in this batch, across runs).
    public func beginAttempt(run: Int64, batch: String, address: String, adapter: String, at date: Date) throws(BatchLogError)
        -> (id: Int64, number: Int)
    {
        try write { db in
            let number = (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM attempts WHERE batch = ? AND address = ?", arguments: [batch, address]) ?? 0) + 1
            let device = try Row.fetchOne(db, sql: "SELECT name, package_sha256 FROM devices WHERE batch = ? AND address = ?", arguments: [batch, address])
            let name: String? = device?["name"]
            let sha: String = device?["package_sha256"] ?? ""
            let now = Self.timestamp(date)
            try db.execute(
                sql: """
                    INSERT INTO attempts (run_id, batch, address, number, name, adapter, package_sha256, started_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [run, batch, address, number, name, adapter, sha, now])
            let id = db.lastInsertedRowID
            try db.execute(
                sql: "UPDATE devices SET status = 'running', adapter = ?, run_id = ?, attempts = ?, updated_at = ? WHERE batch = ? AND address = ?",
                arguments: [adapter, run, number, now, batch, address])
            return (id, number)
        }
    }

    /// Closes an attempt; with `final`, also writes the device's final status (one transaction).
    public func endAttempt(_ id: Int64, batch: String, address: String, outcome: AttemptOutcome, final: DeviceStatus?, at date: Date)
        throws(BatchLogError)
    {
        try write { db in
            let now = Self.timestamp(date)
            let before = outcome.versionBefore.map { Int64($0) }
            let after = outcome.versionAfter.map { Int64($0) }
            try db.execute(
                sql: """
                    UPDATE attempts SET finished_at = ?, result = ?, error = ?, exit_code = ?, duration = ?, bytes = ?,
                        resends = ?, version_before = ?, version_after = ?, name = COALESCE(?, name)
                    WHERE id = ?
                    """,
                arguments: [
                    now, outcome.result.rawValue, outcome.error, outcome.exitCode.map { Int64($0) }, outcome.duration,
                    outcome.bytes, outcome.resends, before, after, outcome.name, id,
                ])
            let status = final ?? .pending
            try db.execute(
                sql: """
                    UPDATE devices SET status = ?, error = ?, exit_code = ?, duration = duration + ?, bytes = bytes + ?,
                        resends = resends + ?, version_before = COALESCE(version_before, ?),
                        version_after = COALESCE(?, version_after), name = COALESCE(?, name), updated_at = ?
                    WHERE batch = ? AND address = ?
                    """,
                arguments: [
                    status.rawValue, outcome.error, outcome.exitCode.map { Int64($0) }, outcome.duration, outcome.bytes,
                    outcome.resends, before, after, outcome.name, now, batch, address,
                ])
        }
    }

    /// Marks a device skipped without an attempt (the database already records it at the target version).
    public func markSkipped(batch: String, address: String, reason: String, versionAfter: UInt32?, at date: Date) throws(BatchLogError) {
        try write { db in
            try db.execute(
                sql: "UPDATE devices SET status = 'skipped', error = ?, version_after = COALESCE(?, version_after), updated_at = ? WHERE batch = ? AND address = ?",
                arguments: [reason, versionAfter.map { Int64($0) }, Self.timestamp(date), batch, address])
        }
    }

    // MARK: - Helpers

    func write<T>(_ body: (Database) throws -> T) throws(BatchLogError) -> T {
        do {
            return try pool.write(body)
        } catch let error as BatchLogError {
            throw error
        } catch {
            throw BatchLogError(.write, "batch database \(path): \(error)")
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws(BatchLogError) -> T {
        do {
            return try pool.read(body)
        } catch {
            throw BatchLogError(.read, "batch database \(path): \(error)")
        }
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

/// A database failure. Codes are an open set.
public struct BatchLogError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let open = Code(rawValue: "open")
        public static let read = Code(rawValue: "read")
        public static let write = Code(rawValue: "write")
    }

    public var code: Code
    public var reason: String
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }
    public var description: String { reason }
}
