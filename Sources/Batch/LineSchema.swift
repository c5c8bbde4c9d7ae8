/// The batch log's schema, described once and rendered for each SQL dialect (docs/batch.md, "Database").
///
/// Migrations are numbered from 1; `schema_version` holds one row per applied migration, so the database's
/// version is `MAX(version)`. A database whose version is newer than ``LineSchema/current`` is refused (an older
/// bledfu must not write a newer schema it does not know). Version 1 is the layout of the first SQLite log (made
/// by GRDB's migrator, recorded in `grdb_migrations`); version 2 adds what a line of stations needs: claims with
/// leases, stations, the line's plan hash, journals in the store, and live progress.
public enum LineSchema {
    /// The newest schema version this build knows.
    public static var current: Int { migrations.count }

    /// Column types every dialect maps to its own spelling.
    public enum ColumnType: Sendable, Equatable {
        /// An auto-incrementing 64-bit key (`INTEGER PRIMARY KEY AUTOINCREMENT` / `BIGSERIAL PRIMARY KEY`).
        case serial
        /// A 64-bit integer (`INTEGER` / `BIGINT`); booleans are 0 and 1.
        case integer
        /// A double (`REAL` / `DOUBLE PRECISION`).
        case real
        case text
    }

    public struct Column: Sendable, Equatable {
        public var name: String
        public var type: ColumnType
        public var notNull: Bool
        /// A literal SQL default both dialects read alike (`0`, `'running'`).
        public var defaultValue: String?
        /// `REFERENCES table(column)`.
        public var references: String?

        public init(_ name: String, _ type: ColumnType, notNull: Bool = false, default defaultValue: String? = nil, references: String? = nil) {
            self.name = name
            self.type = type
            self.notNull = notNull
            self.defaultValue = defaultValue
            self.references = references
        }
    }

    public struct Table: Sendable, Equatable {
        public var name: String
        public var columns: [Column]
        /// A composite primary key (a `.serial` column is its own key).
        public var primaryKey: [String]
    }

    public enum Step: Sendable, Equatable {
        case createTable(Table)
        case addColumn(table: String, Column)
        case createIndex(name: String, table: String, columns: [String])
    }

    static func column(_ name: String, _ type: ColumnType, notNull: Bool = false, default value: String? = nil) -> Column {
        Column(name, type, notNull: notNull, default: value)
    }

    /// Every migration, in order: `migrations[0]` is version 1.
    public static let migrations: [[Step]] = [version1, version2]

    static let version1: [Step] = [
        .createTable(
            Table(
                name: "runs",
                columns: [
                    column("id", .serial), column("batch", .text, notNull: true), column("started_at", .text, notNull: true),
                    column("finished_at", .text), column("result", .text, notNull: true, default: "'running'"),
                    column("force", .integer, notNull: true, default: "0"),
                ], primaryKey: [])),
        .createTable(
            Table(
                name: "devices",
                columns: [
                    column("batch", .text, notNull: true), column("address", .text, notNull: true),
                    column("address_type", .text, notNull: true), column("name", .text), column("class", .text, notNull: true),
                    column("package_path", .text, notNull: true), column("package_sha256", .text, notNull: true),
                    column("target_version", .integer), column("version_before", .integer), column("version_after", .integer),
                    column("status", .text, notNull: true), column("error", .text), column("exit_code", .integer),
                    column("attempts", .integer, notNull: true, default: "0"), column("duration", .real, notNull: true, default: "0"),
                    column("bytes", .integer, notNull: true, default: "0"), column("resends", .integer, notNull: true, default: "0"),
                    column("adapter", .text), column("run_id", .integer), column("updated_at", .text, notNull: true),
                ], primaryKey: ["batch", "address"])),
        .createTable(
            Table(
                name: "attempts",
                columns: [
                    column("id", .serial), Column("run_id", .integer, notNull: true, references: "runs(id)"),
                    column("batch", .text, notNull: true), column("address", .text, notNull: true),
                    column("number", .integer, notNull: true), column("name", .text), column("adapter", .text, notNull: true),
                    column("package_sha256", .text, notNull: true), column("version_before", .integer),
                    column("version_after", .integer), column("started_at", .text, notNull: true), column("finished_at", .text),
                    column("result", .text, notNull: true, default: "'running'"), column("error", .text),
                    column("exit_code", .integer), column("duration", .real), column("bytes", .integer, notNull: true, default: "0"),
                    column("resends", .integer, notNull: true, default: "0"),
                ], primaryKey: [])),
        .createIndex(name: "attempts_device", table: "attempts", columns: ["batch", "address"]),
    ]

    /// Version 2: the line. `devices.station`/`lease_until` are the claim (epoch milliseconds); `queue` orders the
    /// pending devices (a retry goes to the back); `tries` counts attempts in the current round (the retry policy);
    /// `stage`/`progress_*` are the live progress the heartbeat writes; `finished_at` dates the final status.
    static let version2: [Step] = [
        .addColumn(table: "devices", column("station", .text)),
        .addColumn(table: "devices", column("lease_until", .integer)),
        .addColumn(table: "devices", column("queue", .integer, notNull: true, default: "0")),
        .addColumn(table: "devices", column("tries", .integer, notNull: true, default: "0")),
        .addColumn(table: "devices", column("stage", .text)),
        .addColumn(table: "devices", column("progress_bytes", .integer, notNull: true, default: "0")),
        .addColumn(table: "devices", column("progress_total", .integer, notNull: true, default: "0")),
        .addColumn(table: "devices", column("finished_at", .text)),
        .addColumn(table: "attempts", column("station", .text)),
        .addColumn(table: "runs", column("station", .text)),
        .createTable(
            Table(
                name: "stations",
                columns: [
                    column("name", .text, notNull: true), column("batch", .text, notNull: true), column("host", .text, notNull: true),
                    column("pid", .integer, notNull: true), column("adapters", .text, notNull: true),
                    column("plan_hash", .text, notNull: true), column("started_at", .text, notNull: true),
                    column("heartbeat_at", .integer, notNull: true), column("lease_ms", .integer, notNull: true),
                    column("state", .text, notNull: true, default: "'running'"),
                ], primaryKey: ["name"])),
        .createTable(
            Table(
                name: "lines",
                columns: [
                    column("batch", .text, notNull: true), column("plan_hash", .text, notNull: true),
                    column("updated_at", .text, notNull: true),
                ], primaryKey: ["batch"])),
        .createTable(
            Table(
                name: "journals",
                columns: [
                    column("address", .text, notNull: true), column("package_sha256", .text, notNull: true),
                    column("content", .text, notNull: true), column("station", .text), column("updated_at", .text, notNull: true),
                ], primaryKey: ["address", "package_sha256"])),
        .createIndex(name: "devices_queue", table: "devices", columns: ["batch", "status", "queue"]),
    ]
}

/// The SQL spellings that differ between SQLite and PostgreSQL. Statements are written once with `?` placeholders;
/// ``SQLDialect/postgres`` numbers them (`$1`, `$2`, …).
public struct SQLDialect: Sendable, Equatable {
    public var name: String

    public static let sqlite = SQLDialect(name: "sqlite")
    public static let postgres = SQLDialect(name: "postgres")

    var isPostgres: Bool { self == .postgres }

    func typeName(_ type: LineSchema.ColumnType) -> String {
        switch type {
        case .serial: isPostgres ? "BIGSERIAL PRIMARY KEY" : "INTEGER PRIMARY KEY AUTOINCREMENT"
        case .integer: isPostgres ? "BIGINT" : "INTEGER"
        case .real: isPostgres ? "DOUBLE PRECISION" : "REAL"
        case .text: "TEXT"
        }
    }

    func columnDefinition(_ column: LineSchema.Column) -> String {
        var parts = [column.name, typeName(column.type)]
        if column.notNull { parts.append("NOT NULL") }
        if let value = column.defaultValue { parts.append("DEFAULT \(value)") }
        if let target = column.references { parts.append("REFERENCES \(target)") }
        return parts.joined(separator: " ")
    }

    /// The statements of one migration step.
    public func render(_ step: LineSchema.Step) -> String {
        switch step {
        case .createTable(let table):
            var lines = table.columns.map(columnDefinition)
            if !table.primaryKey.isEmpty { lines.append("PRIMARY KEY (\(table.primaryKey.joined(separator: ", ")))") }
            return "CREATE TABLE \(table.name) (\n    " + lines.joined(separator: ",\n    ") + "\n)"
        case .addColumn(let table, let column):
            return "ALTER TABLE \(table) ADD COLUMN \(columnDefinition(column))"
        case .createIndex(let name, let table, let columns):
            return "CREATE INDEX \(name) ON \(table)(\(columns.joined(separator: ", ")))"
        }
    }

    /// `sql` with its `?` placeholders as this dialect writes them.
    public func placeholders(_ sql: String) -> String {
        guard isPostgres else { return sql }
        var out = ""
        var index = 0
        for character in sql {
            if character == "?" {
                index += 1
                out += "$\(index)"
            } else {
                out.append(character)
            }
        }
        return out
    }

    /// Row locks for a claim: PostgreSQL skips rows another transaction holds; SQLite's write transaction
    /// (`BEGIN IMMEDIATE`) already excludes every other writer.
    var lockForClaim: String { isPostgres ? " FOR UPDATE SKIP LOCKED" : "" }

    /// A row lock that waits (PostgreSQL), taken on the device's row before its attempt's row, in the order a claim
    /// takes them, so that a late ``BatchLog/endAttempt`` and another station's takeover never deadlock.
    var lockRow: String { isPostgres ? " FOR UPDATE" : "" }

    /// Lists the tables of the current schema by name.
    var tableExistsQuery: String {
        isPostgres
            ? "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
            : "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?"
    }

    /// Serializes schema changes between processes (PostgreSQL: a transaction-scoped advisory lock; SQLite: the
    /// write transaction does).
    var migrationLock: String? { isPostgres ? "SELECT pg_advisory_xact_lock(1701)" : nil }
}
