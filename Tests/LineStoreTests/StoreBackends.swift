import Batch
import Foundation
import LineStore
import Testing

/// The two databases every store test runs on: a real SQLite file (GRDB) and a real PostgreSQL server.
///
/// PostgreSQL: `BLEDFU_TEST_POSTGRES_URL` (tools/test starts a throwaway cluster and sets it). Each test gets a
/// database of its own, made with `CREATE DATABASE` and dropped at the end. Without the variable the PostgreSQL
/// suite is skipped and says why, except under `CI=true`, where it runs and fails.
enum StoreBackend: String, Sendable, CaseIterable {
    case sqlite, postgres

    static var postgresURL: String? {
        ProcessInfo.processInfo.environment["BLEDFU_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static var postgresEnabled: Bool { postgresURL != nil || ProcessInfo.processInfo.environment["CI"] == "true" }

    /// A fresh empty database: its location (path or URL) and how to remove it.
    func fresh() async throws -> (location: String, remove: @Sendable () async -> Void) {
        let name = "bledfu_test_\(UUID().uuidString.prefix(8).lowercased())"
        switch self {
        case .sqlite:
            let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return (directory.appendingPathComponent("line.sqlite").path, { try? FileManager.default.removeItem(at: directory) })
        case .postgres:
            let base = try #require(
                Self.postgresURL, "CI=true and no PostgreSQL server: BLEDFU_TEST_POSTGRES_URL is not set (tools/test starts one)")
            let url = try PostgresURL(base)
            let admin = try await PostgresLineDatabase.connect(url)
            try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
            var mine = url
            mine.database = name
            let location = mine.string
            return (
                location,
                {
                    try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
                    await admin.close()
                }
            )
        }
    }
}
