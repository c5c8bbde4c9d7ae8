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

    /// Any text with the password of a `scheme://user:password@` URL in it replaced by `***`. The credentials end at
    /// the last `@`, so a password with an unescaped `@` in it is hidden whole.
    public static func redact(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].lastIndex(of: "@") else { return text }
        let credentials = text[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }

    /// The scheme of a `scheme://…` location (RFC 3986: a letter, then letters, digits, `+`, `-` or `.`), nil for a
    /// path. Any scheme but `postgres`/`postgresql` is refused, so a mistyped one is never taken for an SQLite path.
    public static func scheme(of text: String) -> String? {
        guard let separator = text.range(of: "://") else { return nil }
        let scheme = text[..<separator.lowerBound]
        guard let first = scheme.first, first.isASCII, first.isLetter,
            scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        return String(scheme)
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
    /// Opens the batch log named by `--db`: a `postgres://` URL (the line's shared store) or an SQLite path. Any other
    /// `scheme://` is refused with the URL redacted (`postgress://u:secret@h/db` is a typo, not a file name).
    /// `mustExist`: a missing SQLite file is an error instead of a new empty log (report, status, serve).
    public static func open(location: String, mustExist: Bool = false) async throws(BatchLogError) -> BatchLog {
        if PostgresURL.isPostgres(location) {
            let url = try PostgresURL(location)
            return try await open(try await PostgresLineDatabase.connect(url))
        }
        if let scheme = PostgresURL.scheme(of: location) {
            throw BatchLogError(
                .open,
                "unsupported database URL scheme '\(scheme)' in \(PostgresURL.redact(location)): "
                    + "use postgres://USER@HOST/DATABASE (or postgresql://) or an SQLite file path")
        }
        guard !mustExist || FileManager.default.fileExists(atPath: location) else {
            throw BatchLogError(.open, "no batch database at \(location)")
        }
        return try await open(path: location)
    }
}
