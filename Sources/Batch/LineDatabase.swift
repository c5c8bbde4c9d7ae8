/// A value bound to or read from a statement. Nulls carry their type (PostgreSQL types every parameter).
public enum SQLValue: Sendable, Equatable {
    case integer(Int64?)
    case real(Double?)
    case text(String?)

    public static func int(_ value: Int?) -> SQLValue { .integer(value.map { Int64($0) }) }
    public static func uint(_ value: UInt32?) -> SQLValue { .integer(value.map { Int64($0) }) }
}

/// One result row by column name.
public struct SQLRow: Sendable, Equatable {
    public var values: [String: SQLValue]

    public init(_ values: [String: SQLValue]) { self.values = values }

    public func int64(_ column: String) -> Int64? {
        switch values[column] {
        case .integer(let value): value
        case .real(let value): value.map { Int64($0) }
        case .text(let value): value.flatMap { Int64($0) }
        case nil: nil
        }
    }

    public func int(_ column: String) -> Int? { int64(column).map { Int(clamping: $0) } }

    public func uint32(_ column: String) -> UInt32? { int64(column).flatMap { UInt32(exactly: $0) } }

    public func double(_ column: String) -> Double? {
        switch values[column] {
        case .integer(let value): value.map { Double($0) }
        case .real(let value): value
        case .text(let value): value.flatMap { Double($0) }
        case nil: nil
        }
    }

    public func string(_ column: String) -> String? {
        switch values[column] {
        case .text(let value): value
        case .integer(let value): value.map { String($0) }
        case .real(let value): value.map { String($0) }
        case nil: nil
        }
    }
}

/// Statements inside one transaction of a ``LineDatabase``.
public protocol SQLSession: Sendable {
    /// Runs a statement written with `?` placeholders (the dialect numbers them).
    func execute(_ sql: String, _ arguments: [SQLValue]) async throws
    func rows(_ sql: String, _ arguments: [SQLValue]) async throws -> [SQLRow]
}

extension SQLSession {
    func execute(_ sql: String, _ arguments: SQLValue...) async throws { try await execute(sql, arguments) }
    func rows(_ sql: String, _ arguments: SQLValue...) async throws -> [SQLRow] { try await rows(sql, arguments) }
    func row(_ sql: String, _ arguments: SQLValue...) async throws -> SQLRow? { try await rows(sql, arguments).first }
    func row(_ sql: String, _ arguments: [SQLValue]) async throws -> SQLRow? { try await rows(sql, arguments).first }
}

/// Where the batch log lives: SQLite (GRDB, ``SQLiteLineDatabase``, one station) or PostgreSQL (PostgresNIO, the
/// `LineStore` module, a line of stations). ``BatchLog`` holds every statement; a database only runs them.
public protocol LineDatabase: Sendable {
    var dialect: SQLDialect { get }
    /// Where the database is, for messages: a path, or a URL without its password.
    var displayName: String { get }
    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws. Transactions of one
    /// process run one at a time; `write` ones exclude other writers at once (SQLite `BEGIN IMMEDIATE`).
    func transaction<T: Sendable>(write: Bool, _ body: @Sendable (any SQLSession) async throws -> T) async throws -> T
    /// Closes the connection (idempotent).
    func close() async
}

/// Serializes the async transactions of one process (a FIFO of waiting tasks; no polling). A wait for the gate has a
/// deadline (on the injected clock): a transaction that holds it longer (a database server that stopped answering)
/// makes the ones behind it fail with one line instead of waiting forever.
public actor TransactionGate {
    private var busy = false
    private var waiting: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextID: UInt64 = 0
    private let limit: Duration
    private let sleep: @Sendable (Duration) async throws -> Void

    /// - Parameter limit: the longest a transaction waits for the one before it to end.
    public init(limit: Duration = .seconds(120), clock: some Clock<Duration> = ContinuousClock()) {
        self.limit = limit
        self.sleep = { try await clock.sleep(for: $0) }
    }

    /// Waits for this transaction's turn; throws (a `write` error naming the wait) when `limit` passes first.
    public func enter() async throws(BatchLogError) {
        if !busy {
            busy = true
            return
        }
        nextID += 1
        let id = nextID
        let sleep = self.sleep
        let limit = self.limit
        let timer = Task {
            do {
                try await sleep(limit)
            } catch {
                return  // admitted first
            }
            await self.expire(id)
        }
        defer { timer.cancel() }
        let admitted = await withCheckedContinuation { waiting.append((id, $0)) }
        guard admitted else {
            throw BatchLogError(.write, "the database did not finish the previous transaction within \(limit.components.seconds) s")
        }
    }

    public func leave() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().continuation.resume(returning: true)
        }
    }

    /// How many transactions wait (for tests).
    public var waitingCount: Int { waiting.count }

    private func expire(_ id: UInt64) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        waiting.remove(at: index).continuation.resume(returning: false)
    }
}
