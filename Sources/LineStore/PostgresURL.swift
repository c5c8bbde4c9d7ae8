import Batch
import Foundation
import PostgresNIO

/// A line database URL as libpq spells it: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, `postgresql://` too;
/// `?host=/run/postgresql` (a directory) connects over the Unix socket `DIR/.s.PGSQL.PORT`; `?sslmode=disable`
/// (the default) is the only TLS mode. The password never appears in ``redacted``, in messages or on the dashboard.
public struct PostgresURL: Sendable, Equatable {
    public var user: String
    public var password: String?
    public var host: String
    public var port: Int
    public var database: String
    /// A Unix socket directory (`?host=DIR`).
    public var socketDirectory: String?
    /// Seconds allowed for connecting (`?connect_timeout=N`, default 5).
    public var connectTimeout: Int

    /// True for `postgres://` and `postgresql://` (anything else is an SQLite path).
    public static func isPostgres(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    public init(_ text: String) throws(BatchLogError) {
        let bad = { (why: String) in BatchLogError(.open, "bad database URL \(Self.redact(text)): \(why)") }
        guard Self.isPostgres(text), let components = URLComponents(string: text) else {
            throw bad("expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        let queries = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        for key in queries.keys where !["host", "sslmode", "connect_timeout"].contains(key) {
            throw bad("unknown parameter '\(key)' (known: host, sslmode, connect_timeout)")
        }
        if let mode = queries["sslmode"], mode != "disable" {
            throw bad("sslmode=\(mode) is not supported: use sslmode=disable on a trusted network or a Unix socket")
        }
        socketDirectory = queries["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        if components.host?.isEmpty != false, socketDirectory == nil, queries["host"] == nil {
            throw bad("no host")
        }
        port = components.port ?? 5432
        guard let user = components.user, !user.isEmpty else { throw bad("no user") }
        self.user = user.removingPercentEncoding ?? user
        password = components.password.map { $0.removingPercentEncoding ?? $0 }
        let name = String(components.path.drop { $0 == "/" })
        guard !name.isEmpty, !name.contains("/") else { throw bad("no database name") }
        database = name
        connectTimeout = Int(queries["connect_timeout"] ?? "5") ?? 5
    }

    /// The URL again, password included (for a child process or a test; never printed).
    public var string: String {
        let user = self.user.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? self.user
        let secret = password.map { ":" + ($0.addingPercentEncoding(withAllowedCharacters: .urlPasswordAllowed) ?? $0) } ?? ""
        let socket = socketDirectory.map { "?host=\($0)" } ?? ""
        return "postgres://\(user)\(secret)@\(socketDirectory == nil ? "\(host):\(port)" : "")/\(database)\(socket)"
    }

    /// The URL without its password.
    public var redacted: String {
        let socket = socketDirectory.map { "?host=\($0)" } ?? ""
        let where_ = socketDirectory == nil ? "\(host):\(port)" : ""
        return "postgres://\(user)@\(where_)/\(database)\(socket)"
    }

    /// Any text with the password of a `scheme://user:password@` URL in it replaced by `***`.
    public static func redact(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].firstIndex(of: "@") else { return text }
        let credentials = text[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }

    var configuration: PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let socketDirectory {
            configuration = PostgresConnection.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database)
        } else {
            configuration = PostgresConnection.Configuration(
                host: host, port: port, username: user, password: password, database: database, tls: .disable)
        }
        configuration.options.connectTimeout = .seconds(Int64(connectTimeout))
        return configuration
    }
}

extension BatchLog {
    /// Opens the batch log named by `--db`: a `postgres://` URL (the line's shared store) or an SQLite path.
    public static func open(location: String) async throws(BatchLogError) -> BatchLog {
        guard PostgresURL.isPostgres(location) else { return try await open(path: location) }
        let url = try PostgresURL(location)
        return try await open(try await PostgresLineDatabase.connect(url))
    }
}
