import Foundation
import GRDB
import Testing

@testable import Batch

/// One schema description, rendered for SQLite and PostgreSQL; a log made before the version table migrates.
@Suite(.timeLimit(.minutes(2))) struct LineSchemaTests {
    @Test func oneDescriptionRendersForBothDialects() throws {
        let runs = try #require(
            LineSchema.migrations[0].first.flatMap { step -> LineSchema.Table? in
                if case .createTable(let table) = step { return table }
                return nil
            })
        #expect(
            SQLDialect.sqlite.render(.createTable(runs)) == """
                CREATE TABLE runs (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    batch TEXT NOT NULL,
                    started_at TEXT NOT NULL,
                    finished_at TEXT,
                    result TEXT NOT NULL DEFAULT 'running',
                    force INTEGER NOT NULL DEFAULT 0
                )
                """)
        #expect(
            SQLDialect.postgres.render(.createTable(runs)) == """
                CREATE TABLE runs (
                    id BIGSERIAL PRIMARY KEY,
                    batch TEXT NOT NULL,
                    started_at TEXT NOT NULL,
                    finished_at TEXT,
                    result TEXT NOT NULL DEFAULT 'running',
                    force BIGINT NOT NULL DEFAULT 0
                )
                """)
        let lease = LineSchema.Step.addColumn(table: "devices", LineSchema.Column("lease_until", .integer))
        #expect(SQLDialect.sqlite.render(lease) == "ALTER TABLE devices ADD COLUMN lease_until INTEGER")
        #expect(SQLDialect.postgres.render(lease) == "ALTER TABLE devices ADD COLUMN lease_until BIGINT")
        #expect(SQLDialect.postgres.render(.addColumn(table: "attempts", LineSchema.Column("duration", .real))).hasSuffix("DOUBLE PRECISION"))
        // Statements are written once with `?`; PostgreSQL numbers them.
        #expect(SQLDialect.postgres.placeholders("UPDATE a SET b = ? WHERE c = ? AND d = ?") == "UPDATE a SET b = $1 WHERE c = $2 AND d = $3")
        #expect(SQLDialect.sqlite.placeholders("WHERE c = ?") == "WHERE c = ?")
        #expect(SQLDialect.postgres.lockForClaim == " FOR UPDATE SKIP LOCKED" && SQLDialect.sqlite.lockForClaim.isEmpty)
        #expect(LineSchema.current == LineSchema.migrations.count)
    }

    /// A log written by the first bledfu batch (GRDB's migrator, "v1" in grdb_migrations, no schema_version) opens as
    /// version 1, migrates to the current version, and keeps its rows.
    @Test func aLogFromBeforeTheVersionTableMigrates() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("fleet-v1-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("batch.sqlite").path
        do {
            let old = try DatabaseQueue(path: path)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { db in
                for step in LineSchema.migrations[0] { try db.execute(sql: SQLDialect.sqlite.render(step)) }
                try db.execute(
                    sql: """
                        INSERT INTO devices (batch, address, address_type, class, package_path, package_sha256, status, updated_at)
                        VALUES ('old.yaml', 'C6:05:04:03:00:01', 'random', 'bracelet', '/p.zip', 'ab', 'done', '2026-01-01T00:00:00.000Z')
                        """)
            }
            try migrator.migrate(old)
            try old.close()
        }
        let log = try await BatchLog.open(path: path)
        #expect(try await log.schemaVersion() == LineSchema.current)
        let records = try await log.devices()
        #expect(records.map(\.address) == ["C6:05:04:03:00:01"] && records.first?.status == .done && records.first?.station == nil)
    }
}
