import GRDB

/// The batch log on an SQLite file (GRDB's `DatabasePool`, WAL journal mode): the embedded default for one station.
///
/// A transaction is opened with `BEGIN IMMEDIATE`, which takes SQLite's single write lock at once: two stations
/// (processes) on one file claim devices one after the other, the single-writer equivalent of PostgreSQL's row
/// locks. The transaction spans several GRDB accesses of the writer connection (`allowsUnsafeTransactions`); the
/// ``TransactionGate`` keeps this process's transactions from interleaving on that connection.
public final class SQLiteLineDatabase: LineDatabase {
    let pool: DatabasePool
    let gate = TransactionGate()
    public let path: String
    public var dialect: SQLDialect { .sqlite }
    public var displayName: String { path }

    /// Opens (creating when needed) the file; waits up to `busyTimeout` seconds for another process's write lock.
    public init(path: String, busyTimeout: Double = 10) throws {
        self.path = path
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.allowsUnsafeTransactions = true
        pool = try DatabasePool(path: path, configuration: configuration)
    }

    struct Session: SQLSession {
        let pool: DatabasePool

        func execute(_ sql: String, _ arguments: [SQLValue]) async throws {
            try await pool.writeWithoutTransaction { db in
                try db.execute(sql: sql, arguments: StatementArguments(arguments.map(Self.databaseValue)))
            }
        }

        func rows(_ sql: String, _ arguments: [SQLValue]) async throws -> [SQLRow] {
            try await pool.writeWithoutTransaction { db in
                try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments.map(Self.databaseValue))).map(Self.row)
            }
        }

        static func databaseValue(_ value: SQLValue) -> DatabaseValue {
            switch value {
            case .integer(let value): value?.databaseValue ?? .null
            case .real(let value): value?.databaseValue ?? .null
            case .text(let value): value?.databaseValue ?? .null
            }
        }

        static func row(_ row: Row) -> SQLRow {
            var values: [String: SQLValue] = [:]
            for (column, value) in row {
                switch value.storage {
                case .null: values[column] = .text(nil)
                case .int64(let number): values[column] = .integer(number)
                case .double(let number): values[column] = .real(number)
                case .string(let text): values[column] = .text(text)
                case .blob(let data): values[column] = .text(String(decoding: data, as: UTF8.self))
                }
            }
            return SQLRow(values)
        }
    }

    public func transaction<T: Sendable>(write: Bool, _ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await gate.enter()
        let session = Session(pool: pool)
        do {
            try await session.execute(write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED", [])
        } catch {
            await gate.leave()
            throw error
        }
        do {
            let value = try await body(session)
            try await session.execute("COMMIT", [])
            await gate.leave()
            return value
        } catch {
            try? await session.execute("ROLLBACK", [])
            await gate.leave()
            throw error
        }
    }

    public func close() async {
        try? pool.close()
    }

    /// The journal mode SQLite reports ("wal").
    public func journalMode() throws -> String {
        try pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }
}
