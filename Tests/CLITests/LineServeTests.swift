import Batch
import ArgumentParser
import Foundation
import Testing

@testable import BledfuCLI

/// `bledfu line serve` without a browser: where it listens by default and that it changes nothing (GET only).
@Suite(.serialized, .timeLimit(.minutes(3))) struct LineServeTests {
    /// The default is loopback, port 8080; `[::1]:0` and the like parse; a listen address without a host or port is
    /// a usage error.
    @Test func theDefaultListenAddressIsLoopback() throws {
        let serve = try LineServe.parse(["--db", "/tmp/none.sqlite"])
        #expect(serve.listen == "127.0.0.1:8080")
        let loopback = try LineServe.parseListen(serve.listen)
        #expect(loopback.host == "127.0.0.1" && loopback.port == 8080)
        let six = try LineServe.parseListen("[::1]:0")
        #expect(six.host == "::1" && six.port == 0)
        #expect(throws: CLIError.self) { try LineServe.parseListen(":8080") }
        #expect(throws: CLIError.self) { try LineServe.parseListen("127.0.0.1") }
    }

    /// A running dashboard answers GET and refuses every other method (405 or 404: no route changes anything), and
    /// the database it shows is unchanged afterwards.
    @Test func aNonGETRequestIsRefused() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("bledfu-serve-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("line.sqlite").path
        let log = try await BatchLog.open(path: path)
        await log.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let server = try DashboardServer(location: path)
        defer { server.stop() }
        let port = try #require(await server.waitForPort(), "line serve did not start: \(server.stderr)")
        #expect(server.stderr.contains("http://127.0.0.1:\(port)/ (read-only"), "\(server.stderr)")
        func status(_ method: String, _ route: String) async throws -> Int {
            let output = try await CLIRunner.runTool(
                "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, "--max-time", "30", "http://127.0.0.1:\(port)\(route)"])
            return Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        #expect(try await status("GET", "/api/snapshot") == 200)
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            for route in ["/", "/api/snapshot", "/events"] {
                let code = try await status(method, route)
                #expect(code == 405 || code == 404, "\(method) \(route): \(code)")
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the database is unchanged")
    }
}
