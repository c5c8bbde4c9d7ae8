import BLECore
import Batch
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// The batch log on PostgreSQL (PostgresNIO): the shared store of a line of stations.
///
/// One connection per process, opened at ``connect(_:)`` (a wrong URL, an unreachable server or a refused login
/// fail there, with the server's own words) and opened again by the next transaction after it dropped. Statements
/// use the dialect's numbered parameters; transactions run one at a time through a ``TransactionGate``.
public final class PostgresLineDatabase: LineDatabase {
    public let url: PostgresURL
    public var dialect: SQLDialect { .postgres }
    public var displayName: String { url.redacted }
    let gate = TransactionGate()
    let holder: ConnectionHolder
    let logger = Logger(label: "bledfu.line.postgres")

    actor ConnectionHolder {
        var connection: PostgresConnection?
        let configuration: PostgresConnection.Configuration
        var nextID = 1

        init(configuration: PostgresConnection.Configuration) { self.configuration = configuration }

        func current(logger: Logger) async throws -> PostgresConnection {
            if let connection, !connection.isClosed { return connection }
            nextID += 1
            let opened = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: nextID, logger: logger)
            // A station stopped inside a transaction (SIGSTOP, a suspended machine) would hold its row locks for as long
            // as it stays stopped, and the other stations' claims (FOR UPDATE SKIP LOCKED) would pass its devices by
            // forever: the server ends a transaction idle for longer than this and releases its locks.
            let limit = PostgresQuery(
                unsafeSQL: "SET idle_in_transaction_session_timeout = '\(PostgresLineDatabase.idleTransactionLimit)'")
            let rows = try await opened.query(limit, logger: logger)
            for try await _ in rows {}
            connection = opened
            return opened
        }

        func close() async {
            try? await connection?.close()
            connection = nil
        }

        /// A database dropped without ``PostgresLineDatabase/close()`` (an error path that forgot it) still closes
        /// its session: PostgresNIO traps (debug builds) when a connection is freed open, and the server would keep
        /// the session until it noticed. The close's completion holds the connection until it is closed.
        deinit {
            guard let connection, !connection.isClosed else { return }
            connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
        }
    }

    /// How long the server lets a transaction of this station sit idle before it ends it (PostgreSQL's
    /// `idle_in_transaction_session_timeout`): far above any pause between the statements of a running transaction.
    public static let idleTransactionLimit = "10s"

    init(url: PostgresURL) {
        self.url = url
        holder = ConnectionHolder(configuration: url.configuration)
    }

    /// Connects to `url` at once, so that a bad URL or an unreachable server is one clear error before anything else.
    public static func connect(_ url: PostgresURL) async throws(BatchLogError) -> PostgresLineDatabase {
        let database = PostgresLineDatabase(url: url)
        do {
            _ = try await database.holder.current(logger: database.logger)
        } catch {
            throw BatchLogError(.open, "cannot connect to the line database \(url.redacted): \(Self.describe(error))")
        }
        return database
    }

    struct Session: SQLSession {
        let connection: PostgresConnection
        let logger: Logger

        func query(_ sql: String, _ arguments: [SQLValue]) throws -> PostgresQuery {
            var binds = PostgresBindings(capacity: arguments.count)
            for argument in arguments {
                switch argument {
                case .integer(let value): binds.append(value)
                case .real(let value): binds.append(value)
                case .text(let value): binds.append(value)
                }
            }
            return PostgresQuery(unsafeSQL: SQLDialect.postgres.placeholders(sql), binds: binds)
        }

        func execute(_ sql: String, _ arguments: [SQLValue]) async throws {
            let rows = try await connection.query(query(sql, arguments), logger: logger)
            for try await _ in rows {}
        }

        func rows(_ sql: String, _ arguments: [SQLValue]) async throws -> [SQLRow] {
            var result: [SQLRow] = []
            for try await row in try await connection.query(query(sql, arguments), logger: logger) {
                var values: [String: SQLValue] = [:]
                for cell in row {
                    values[cell.columnName] = try Self.value(cell)
                }
                result.append(SQLRow(values))
            }
            return result
        }

        static func value(_ cell: PostgresCell) throws -> SQLValue {
            switch cell.dataType {
            case .int8, .int4, .int2: .integer(try cell.decode(Int64?.self))
            case .float8, .float4: .real(try cell.decode(Double?.self))
            case .numeric: .real(try cell.decode(String?.self).flatMap { Double($0) })
            case .bool: .integer(try cell.decode(Bool?.self).map { $0 ? 1 : 0 })
            default: .text(try cell.decode(String?.self))
            }
        }
    }

    public func transaction<T: Sendable>(write: Bool, _ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await gate.enter()
        do {
            let connection = try await holder.current(logger: logger)
            let session = Session(connection: connection, logger: logger)
            try await session.execute("BEGIN", [])
            do {
                let value = try await body(session)
                try await session.execute("COMMIT", [])
                await gate.leave()
                return value
            } catch {
                try? await session.execute("ROLLBACK", [])
                throw error
            }
        } catch let error as BatchLogError {
            await gate.leave()
            throw error
        } catch {
            await gate.leave()
            throw PostgresLineError(Self.describe(error))
        }
    }

    public func close() async { await holder.close() }

    /// Runs one statement outside any transaction (`CREATE DATABASE` cannot run in one).
    public func executeOutsideTransaction(_ sql: String) async throws(BatchLogError) {
        try await gate.enter()
        do {
            let connection = try await holder.current(logger: logger)
            try await Session(connection: connection, logger: logger).execute(sql, [])
            await gate.leave()
        } catch {
            await gate.leave()
            throw BatchLogError(.write, "\(url.redacted): \(Self.describe(error))")
        }
    }

    /// The server's message (and SQLSTATE), or the connection's cause, without PostgresNIO's generic text.
    public static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] {
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + state
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }
}

/// A PostgreSQL failure, in words.
public struct PostgresLineError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The server refused a statement, or the connection failed.
        public static let database = Code(rawValue: "database")
    }

    public var code: Code { .database }
    public var message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
