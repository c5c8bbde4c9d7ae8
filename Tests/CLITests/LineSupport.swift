import Batch
import Foundation
import LineStore
import LinuxIO
import Testing

/// A PostgreSQL database of its own for one test, on the server `BLEDFU_TEST_POSTGRES_URL` names (tools/test starts
/// a throwaway cluster and sets it). Without it the line tests are skipped and say why, except under `CI=true`.
final class TestLineDatabase {
    static var baseURL: String? {
        ProcessInfo.processInfo.environment["BLEDFU_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }
    static var enabled: Bool { baseURL != nil || ProcessInfo.processInfo.environment["CI"] == "true" }
    static let skipReason: Comment = "no PostgreSQL server: set BLEDFU_TEST_POSTGRES_URL (tools/test starts a throwaway cluster and sets it)"

    let name: String
    let url: String
    let base: PostgresURL

    init() async throws {
        let text = try #require(Self.baseURL, "CI=true and no PostgreSQL server: BLEDFU_TEST_POSTGRES_URL is not set")
        base = try PostgresURL(text)
        name = "bledfu_line_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = try await PostgresLineDatabase.connect(base)
        try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
        await admin.close()
        var mine = base
        mine.database = name
        url = mine.string
    }

    func drop() async {
        guard let admin = try? await PostgresLineDatabase.connect(base) else { return }
        try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
    }

    func open() async throws -> BatchLog { try await BatchLog.open(location: url) }
}

/// A `bledfu batch` station as a child process with its NDJSON events in a file.
final class StationProcess {
    let name: String
    let process: SpawnedProcess
    let output: URL
    let errors: URL

    init(name: String, plan: String, database: String, state: URL, lease: Double, in directory: URL) throws {
        self.name = name
        output = directory.appendingPathComponent("\(name).out")
        errors = directory.appendingPathComponent("\(name).err")
        process = try SpawnedProcess(
            CLIRunner.binary,
            ["batch", plan, "--json", "--db", database, "--station", name, "--state-dir", state.path, "--lease", "\(lease)"],
            stdout: output, stderr: errors)
    }

    // Bounded (a SIGKILL'd child's exit): deinit cannot await.
    deinit { process.child.terminateBlocking(signal: SIGKILL) }

    var pid: Int32 { process.processIdentifier }
    var events: [[String: Any]] {
        ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
    var stderr: String { (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }

    func count(_ event: String) -> Int { events.filter { $0["event"] as? String == event }.count }

    /// Awaits (bounded, on the reactor) the exit; nil when it did not exit in time.
    func wait(timeout: TimeInterval) async -> Int32? {
        guard await process.child.wait(timeout: .seconds(timeout)) != nil else { return nil }
        return process.terminationStatus
    }
}

/// One link of the simulator's log: which process connected to which device, when.
struct LinkEvent {
    var identity: String
    var event: String
    var pid: Int
    var parent: Int?
    var micros: Int

    /// The `connected`/`disconnected` lines `bledfu simulate --json` writes (with the connecting process).
    static func parse(_ text: String) -> [LinkEvent] {
        text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let event = object["event"] as? String, event == "connected" || event == "disconnected",
                let identity = object["identity"] as? String, let pid = object["pid"] as? Int, let micros = object["at_us"] as? Int
            else { return nil }
            return LinkEvent(identity: identity, event: event, pid: pid, parent: object["parent_pid"] as? Int, micros: micros)
        }
    }
}

extension BatchLine {
    /// A copy of a profile in Firmware/ with another name and address, stored under `file` (the name may hold any
    /// characters, markup included).
    func profile(_ base: String, name: String, address: String, file: String) throws -> String {
        let url = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/\(base).json")
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        object["name"] = name
        object["address"] = address
        let path = directory.appendingPathComponent(file)
        try JSONSerialization.data(withJSONObject: object).write(to: path)
        return path.path
    }
}
