import BLECore
import Foundation

/// The line's record (docs/batch.md, "Database"): one row per attempt (`attempts`), one final row per device and
/// batch (`devices`), one row per run of a station (`runs`), and for a line of stations their claims, heartbeats,
/// journals and the line's plan (`stations`, `lines`, `journals`). Every statement is written once here and runs on
/// either dialect of ``LineDatabase`` (SQLite for one station, PostgreSQL for a line).
///
/// Every state change is its own committed transaction, so a crash (kill -9, power loss) loses at most the change
/// under way: a run that ended without `finishRun` leaves `running` rows, which the next run of the same station
/// closes as `interrupted` (attempts) and takes up again (devices); another station takes them over once their
/// lease has expired.
public final class BatchLog: Sendable {
    public let database: any LineDatabase
    /// Where the database is (a path, or a URL without its password).
    public var path: String { database.displayName }

    init(database: any LineDatabase) {
        self.database = database
    }

    /// Opens (creating and migrating when needed) the SQLite file at `path`.
    public static func open(path: String) async throws(BatchLogError) -> BatchLog {
        let database: SQLiteLineDatabase
        do {
            database = try SQLiteLineDatabase(path: path)
        } catch {
            throw BatchLogError(.open, "cannot open the batch database \(path): \(error)")
        }
        return try await open(database)
    }

    /// Migrates `database` to ``LineSchema/current``; refuses a database of a newer schema.
    public static func open(_ database: any LineDatabase) async throws(BatchLogError) -> BatchLog {
        let log = BatchLog(database: database)
        do {
            try await log.migrate()
        } catch {
            await database.close()
            throw error
        }
        return log
    }

    /// The database's schema version (0: empty).
    public func schemaVersion() async throws(BatchLogError) -> Int {
        try await read { s in try await Self.version(s, dialect: self.database.dialect) }
    }

    static func version(_ s: any SQLSession, dialect: SQLDialect) async throws -> Int {
        guard try await !s.rows(dialect.tableExistsQuery, .text("schema_version")).isEmpty else { return 0 }
        return try await s.row("SELECT MAX(version) AS version FROM schema_version")?.int("version") ?? 0
    }

    func migrate() async throws(BatchLogError) {
        let dialect = database.dialect
        let name = path
        try await write { s in
            if let lock = dialect.migrationLock { try await s.execute(lock) }
            if try await s.rows(dialect.tableExistsQuery, .text("schema_version")).isEmpty {
                try await s.execute(
                    dialect.render(
                        .createTable(
                            LineSchema.Table(
                                name: "schema_version",
                                columns: [
                                    LineSchema.Column("version", .integer, notNull: true),
                                    LineSchema.Column("applied_at", .text, notNull: true),
                                ], primaryKey: ["version"]))))
                // The first SQLite logs were made by GRDB's migrator: its "v1" is schema version 1.
                if try await !s.rows(dialect.tableExistsQuery, .text("grdb_migrations")).isEmpty,
                    try await !s.rows("SELECT identifier FROM grdb_migrations WHERE identifier = 'v1'").isEmpty
                {
                    try await s.execute("INSERT INTO schema_version (version, applied_at) VALUES (1, ?)", .text(Self.timestamp(Date())))
                }
            }
            let version = try await Self.version(s, dialect: dialect)
            guard version <= LineSchema.current else {
                throw BatchLogError(
                    .newerSchema,
                    "the batch database \(name) has schema version \(version); this bledfu knows versions up to \(LineSchema.current): update bledfu")
            }
            for next in (version + 1)..<(LineSchema.current + 1) {
                for step in LineSchema.migrations[next - 1] { try await s.execute(dialect.render(step)) }
                try await s.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", .int(next), .text(Self.timestamp(Date())))
            }
        }
    }

    public func close() async { await database.close() }

    // MARK: - Runs

    /// Finishes a run of `station`: closes its run, releases whatever it still claims and marks it stopped.
    public func finishRun(_ run: Int64, station: String? = nil, result: String, at date: Date) async throws(BatchLogError) {
        try await write { s in
            try await s.execute("UPDATE runs SET result = ?, finished_at = ? WHERE id = ?", .text(result), .text(Self.timestamp(date)), .integer(run))
            guard let station else { return }
            try await s.execute(
                "UPDATE devices SET status = 'pending', station = NULL, lease_until = NULL, stage = NULL WHERE station = ? AND status = 'running'",
                .text(station))
            try await s.execute("UPDATE stations SET state = 'stopped' WHERE name = ?", .text(station))
        }
    }

    // MARK: - Devices

    /// Adds the device as `pending` (at the back of the queue) unless the batch already has it; returns its record.
    @discardableResult
    public func enroll(batch: String, device: DeviceRecord.Identity, at date: Date) async throws(BatchLogError) -> DeviceRecord {
        try await write { s in
            try await s.execute(
                """
                INSERT INTO devices (batch, address, address_type, name, class, package_path, package_sha256,
                    target_version, status, updated_at, queue)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, (SELECT COALESCE(MAX(queue), 0) + 1 FROM devices WHERE batch = ?))
                ON CONFLICT(batch, address) DO UPDATE SET
                    name = COALESCE(excluded.name, devices.name),
                    class = excluded.class, package_path = excluded.package_path,
                    package_sha256 = excluded.package_sha256, target_version = excluded.target_version
                """, .text(batch), .text(device.address), .text(device.addressType), .text(device.name), .text(device.className),
                .text(device.packagePath), .text(device.packageSHA256), .uint(device.targetVersion), .text(Self.timestamp(date)),
                .text(batch))
            guard let row = try await s.row("SELECT * FROM devices WHERE batch = ? AND address = ?", .text(batch), .text(device.address)) else {
                throw BatchLogError(.write, "device \(device.address) vanished")
            }
            return DeviceRecord(row: row)
        }
    }

    /// The record that says this device already runs this package (done or skipped at the target version), in any
    /// batch of this database.
    public func completed(address: String, packageSHA256: String, targetVersion: UInt32?) async throws(BatchLogError) -> DeviceRecord? {
        try await read { s in
            let rows = try await s.rows(
                "SELECT * FROM devices WHERE address = ? AND status IN ('done', 'skipped') ORDER BY updated_at DESC", .text(address))
            return rows.map(DeviceRecord.init(row:)).first { record in
                if record.status == .done, record.packageSHA256 == packageSHA256 { return true }
                if let target = targetVersion, let after = record.versionAfter, after >= target { return true }
                return false
            }
        }
    }

    /// Devices of `batch` not yet final (pending or running), e.g. left by a crashed run.
    public func unfinished(batch: String) async throws(BatchLogError) -> [DeviceRecord] {
        try await devices(batch: batch).filter { $0.status == .pending || $0.status == .running }
    }

    /// Every device record of `batch` (nil: of every batch), in address order; `station` keeps only the devices
    /// that station holds or finished.
    public func devices(batch: String? = nil, station: String? = nil) async throws(BatchLogError) -> [DeviceRecord] {
        try await read { s in
            var sql = "SELECT * FROM devices WHERE 1 = 1"
            var arguments: [SQLValue] = []
            if let batch {
                sql += " AND batch = ?"
                arguments.append(.text(batch))
            }
            if let station {
                sql += " AND station = ?"
                arguments.append(.text(station))
            }
            return try await s.rows(sql + " ORDER BY batch, address", arguments).map(DeviceRecord.init(row:))
        }
    }

    /// Every attempt of `batch` (nil: of every batch), oldest first; `station` keeps that station's attempts.
    public func attempts(batch: String? = nil, station: String? = nil) async throws(BatchLogError) -> [AttemptRecord] {
        try await read { s in
            var sql = "SELECT * FROM attempts WHERE 1 = 1"
            var arguments: [SQLValue] = []
            if let batch {
                sql += " AND batch = ?"
                arguments.append(.text(batch))
            }
            if let station {
                sql += " AND station = ?"
                arguments.append(.text(station))
            }
            return try await s.rows(sql + " ORDER BY id", arguments).map(AttemptRecord.init(row:))
        }
    }

    /// Names of the batches in the database.
    public func batches() async throws(BatchLogError) -> [String] {
        try await read { s in
            try await s.rows("SELECT DISTINCT batch FROM devices ORDER BY batch").compactMap { $0.string("batch") }
        }
    }

    /// Marks a device skipped without an attempt (the database already records it at the target version).
    public func markSkipped(batch: String, address: String, reason: String, versionAfter: UInt32?, at date: Date) async throws(BatchLogError) {
        try await write { s in
            try await s.execute(
                """
                UPDATE devices SET status = 'skipped', error = ?, version_after = COALESCE(?, version_after), updated_at = ?,
                    finished_at = ? WHERE batch = ? AND address = ?
                """, .text(reason), .uint(versionAfter), .text(Self.timestamp(date)), .text(Self.timestamp(date)), .text(batch),
                .text(address))
        }
    }

    // MARK: - Helpers

    func write<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws(BatchLogError) -> T {
        do {
            return try await database.transaction(write: true, body)
        } catch let error as BatchLogError {
            throw error
        } catch {
            throw BatchLogError(.write, "batch database \(path): \(error)")
        }
    }

    func read<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws(BatchLogError) -> T {
        do {
            return try await database.transaction(write: false, body)
        } catch let error as BatchLogError {
            throw error
        } catch {
            throw BatchLogError(.read, "batch database \(path): \(error)")
        }
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// Milliseconds since 1970 (leases and heartbeats).
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}

/// A database failure. Codes are an open set.
public struct BatchLogError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let open = Code(rawValue: "open")
        public static let read = Code(rawValue: "read")
        public static let write = Code(rawValue: "write")
        /// The database's schema is newer than this build knows.
        public static let newerSchema = Code(rawValue: "newer-schema")
        /// A live station of the line already has this name.
        public static let stationNameTaken = Code(rawValue: "station-name-taken")
        /// The line's live stations run another plan (classes and packages).
        public static let planDiffers = Code(rawValue: "plan-differs")
        /// The station no longer holds the device's claim (its lease ran out and another station took the device
        /// over): nothing was written. The scheduler drops the device; it never reaches an exit code.
        public static let claimLost = Code(rawValue: "claim-lost")
    }

    public var code: Code
    public var reason: String
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }
    public var message: String { reason }
    public var description: String { reason }
}
