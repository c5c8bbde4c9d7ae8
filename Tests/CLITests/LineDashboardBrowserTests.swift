import Batch
import Foundation
import LinuxIO
import LineStore
import Testing

/// `bledfu line serve` in a real headless browser (Debian's chromium over the DevTools protocol, tools/browser):
/// the page loads, shows the stations and the counts the database holds, updates when a device finishes (without a
/// reload: server-sent events), and renders a hostile device name as text. A screenshot is kept in out/.
@Suite(.serialized, .enabled(if: BrowserSession.available, BrowserSession.skipReason))
struct LineDashboardBrowserTests {
    static let hostile = #"<script>document.title='owned'</script><img src=x onerror="document.title='owned'">"#

    @Test(.timeLimit(.minutes(3))) func onSQLite() async throws {
        let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("bledfu-dash-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await check(location: directory.appendingPathComponent("line.sqlite").path, screenshot: "line-dashboard-sqlite.png")
    }

    @Test(.timeLimit(.minutes(3)), .enabled(if: TestLineDatabase.enabled, TestLineDatabase.skipReason))
    func onPostgreSQL() async throws {
        let database = try await TestLineDatabase()
        try await check(location: database.url, screenshot: "line-dashboard-postgres.png", secret: database.base.password)
        await database.drop()
    }

    /// Fills a line, serves it, checks the page against the database, then lets a device finish and checks that
    /// the open page follows.
    func check(location: String, screenshot: String, secret: String? = nil) async throws {
        let log = try await BatchLog.open(location: location)
        let line = try await Self.fill(log)
        let server = try DashboardServer(location: location)
        defer { server.stop() }
        let port = try #require(await server.waitForPort(), "line serve did not start: \(server.stderr)")
        #expect(!server.stderr.contains(secret ?? "\u{0}never"), "the password is never printed")
        let browser = try BrowserSession()
        defer { browser.close() }
        try await browser.open("http://127.0.0.1:\(port)/")
        try await Self.checkPage(browser, secret: secret)
        try await browser.screenshot(CLIRunner.outputDirectory.appendingPathComponent(screenshot).path)

        // A device finishes: the open page follows (server-sent events), no reload.
        let loads = try await browser.eval("performance.getEntriesByType('navigation').length") as? Int
        try await line.end(4, .done)
        try await browser.wait("document.getElementById('count-done').textContent === '3'")
        #expect(try await browser.eval("document.getElementById('count-running').textContent") as? String == "0")
        #expect(try await browser.eval("performance.getEntriesByType('navigation').length") as? Int == loads)
        #expect((try await browser.eval("Number(document.getElementById('updates').textContent)") as? Int ?? 0) >= 2)
        try await browser.screenshot(CLIRunner.outputDirectory.appendingPathComponent(screenshot.replacingOccurrences(of: ".png", with: "-after.png")).path)
        await log.close()
    }

    /// A line filled through the store: its attempts, to end them.
    struct FilledLine {
        let log: BatchLog
        let attemptIDs: [String: Int64]

        func end(_ index: Int, _ result: AttemptResult, error: String? = nil) async throws {
            let address = String(format: "C6:05:04:03:00:%02X", index)
            try await log.endAttempt(
                try #require(attemptIDs[address]), batch: "line", address: address,
                outcome: AttemptOutcome(result: result, error: error, exitCode: result == .done ? 0 : 40, duration: 20, bytes: 1000),
                final: result == .done ? .done : .failed, at: Date())
        }
    }

    /// Two stations, five devices: two done, one failed, one in flight with a hostile name, one pending.
    static func fill(_ log: BatchLog) async throws -> FilledLine {
        let t0 = Date()
        let s1 = StationInfo(name: "station-1", host: "bench-1", pid: 1, adapters: "hci0×4, hci1×4", planHash: "p", lease: 600)
        let s2 = StationInfo(name: "station-2", host: "bench-2", pid: 2, adapters: "hci0×2", planHash: "p", lease: 600)
        let run = try await log.startRun(batch: "line", station: s1, force: false, at: t0)
        let run2 = try await log.startRun(batch: "line", station: s2, force: false, at: t0)
        for index in 1...5 {
            try await log.enroll(
                batch: "line",
                device: DeviceRecord.Identity(
                    address: String(format: "C6:05:04:03:00:%02X", index), addressType: "random",
                    name: index == 4 ? Self.hostile : "Bracelet-\(index)", className: "bracelet", packagePath: "/p.zip",
                    packageSHA256: String(repeating: "ab", count: 32), targetVersion: 2),
                at: t0)
        }
        var attemptIDs: [String: Int64] = [:]
        for (index, station) in [(1, s1), (2, s2), (3, s1), (4, s1)] {
            let claimed = try #require(try await log.claimNext(batch: "line", station: station.name, classes: ["bracelet"], lease: 600, at: t0))
            #expect(claimed.address.hasSuffix(String(format: "%02X", index)))
            attemptIDs[claimed.address] = try await log.beginAttempt(
                run: station == s1 ? run : run2, batch: "line", address: claimed.address, adapter: "hci0", station: station.name, at: t0
            ).id
        }
        let line = FilledLine(log: log, attemptIDs: attemptIDs)
        try await line.end(1, .done)
        try await line.end(2, .done)
        try await line.end(3, .failed, error: #"remote error: "wrong hardware version", extended 0x06 [exit 40]"#)
        try await log.heartbeat(
            batch: "line", station: "station-1", lease: 600,
            progress: ["C6:05:04:03:00:04": DeviceProgress(stage: "uploading", bytes: 7000, total: 10000)], at: Date())
        let snapshot = try await log.snapshot(batch: "line", at: Date())
        #expect(snapshot.done == 2 && snapshot.failed == 1 && snapshot.running == 1 && snapshot.pending == 1)
        return line
    }

    /// The counts and stations the database holds; the hostile name as text; no password.
    static func checkPage(_ browser: BrowserSession, secret: String?) async throws {
        try await browser.wait("document.getElementById('count-done').textContent === '2'")
        #expect(try await browser.eval("document.getElementById('count-failed').textContent") as? String == "1")
        #expect(try await browser.eval("document.getElementById('count-running').textContent") as? String == "1")
        #expect(try await browser.eval("document.getElementById('count-pending').textContent") as? String == "1")
        let stationText = try await browser.eval("document.querySelector('#stations tbody').innerText") as? String ?? ""
        #expect(stationText.contains("station-1") && stationText.contains("station-2") && stationText.contains("hci0×4, hci1×4"), "\(stationText)")
        let failures = try await browser.eval("document.querySelector('#failures tbody').innerText") as? String ?? ""
        #expect(failures.contains("wrong hardware version"), "\(failures)")
        // The hostile name is text: the cell holds it byte for byte, no element came from it, the title is intact.
        #expect(try await browser.eval("document.querySelector('#inflight tbody td').textContent") as? String == Self.hostile)
        #expect(try await browser.eval("document.querySelectorAll('img').length") as? Int == 0)
        #expect(try await browser.eval("document.scripts.length") as? Int == 1)
        #expect(try await browser.eval("document.title") as? String == "bledfu line")
        #expect(try await browser.eval("document.querySelector('#inflight tbody').innerText.includes('70 %')") as? Bool == true)
        let page = try await browser.eval("document.body.innerText") as? String ?? ""
        if let secret { #expect(!page.contains(secret), "the page never shows the database password") }
    }
}

/// `bledfu line serve --listen 127.0.0.1:0` as a child; the port comes from its first line on standard error.
final class DashboardServer {
    let process: SpawnedProcess
    let errors: URL

    init(location: String) throws {
        errors = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("line-serve-\(UUID().uuidString.prefix(8)).err")
        process = try SpawnedProcess(
            CLIRunner.binary, ["line", "serve", "--db", location, "--listen", "127.0.0.1:0", "--refresh", "0.2"], stderr: errors)
    }

    var stderr: String { (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }

    /// The port, once the first line names it (checked every 20 ms for at most 60 s, without holding a thread).
    func waitForPort() async -> Int? {
        var port: Int?
        await OffPool.poll(timeout: .seconds(60), every: .milliseconds(20)) {
            if let range = stderr.range(of: "http://127.0.0.1:") {
                port = Int(stderr[range.upperBound...].prefix { $0.isNumber })
            }
            return port != nil || !process.isRunning
        }
        return port
    }

    /// SIGINT and a bounded wait for the exit (at most 10 s): called from `defer`, which cannot await.
    func stop() {
        process.child.terminateBlocking(signal: SIGINT)
        try? FileManager.default.removeItem(at: errors)
    }
}

/// tools/browser as a child: one command per line in, one JSON answer per line out.
final class BrowserSession {
    static var available: Bool {
        ProcessInfo.processInfo.environment["CI"] == "true"
            || (FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
                && FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/websocket"))
    }
    static let skipReason: Comment = "no headless browser: apt-get install chromium python3-websocket (tools/setup does)"

    // LinuxIO, not Foundation's Process and Pipe: FileHandle.write ends the test process (a `try!` inside) when the
    // browser has gone away; FileIO.writeAll throws instead.
    let process: ChildProcess
    let input: CInt
    let output: CInt
    var buffer = Data()

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init() throws {
        let commands = try ChildProcess.makePipe()
        let answers = try ChildProcess.makePipe()
        defer {
            try? FileIO.close(commands.read)
            try? FileIO.close(answers.write)
        }
        process = try ChildProcess.spawn(
            CLIRunner.repositoryRoot.appendingPathComponent("tools/browser").path, arguments: [],
            standardInput: .descriptor(commands.read), standardOutput: .descriptor(answers.write), standardError: .null,
            ownProcessGroup: false)
        input = commands.write
        output = answers.read
    }

    deinit {
        try? FileIO.close(input)
        try? FileIO.close(output)
    }

    func send(_ command: String) async throws -> Any? {
        do {
            try FileIO.writeAll(input, Array((command + "\n").utf8))
        } catch {
            throw Failure(description: "tools/browser does not take commands: \(error)")
        }
        while !buffer.contains(UInt8(ascii: "\n")) {
            // The answer may take a minute (`wait 60`): read on a thread of its own.
            let output = output
            let chunk = try await OffPool.run { Data((try? BlockingRead.chunk(fd: output)) ?? []) }
            if chunk.isEmpty { throw Failure(description: "tools/browser ended") }
            buffer.append(chunk)
        }
        let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) ?? buffer.endIndex
        let line = buffer[buffer.startIndex..<newline]
        buffer.removeSubrange(buffer.startIndex...newline)
        guard let answer = try JSONSerialization.jsonObject(with: line) as? [String: Any] else { throw Failure(description: "bad answer") }
        guard answer["ok"] as? Bool == true else { throw Failure(description: "\(command): \(answer["error"] ?? "failed")") }
        return answer["value"]
    }

    func open(_ url: String) async throws { _ = try await send("open \(url)") }
    /// Waits (at most 60 s, generous under load) until the expression is true.
    func wait(_ expression: String) async throws { _ = try await send("wait 60 \(expression)") }
    func eval(_ expression: String) async throws -> Any? { try await send("eval \(expression)") }
    func screenshot(_ path: String) async throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        _ = try await send("screenshot \(path)")
    }

    /// Tells the browser to quit; a thread of its own gives it 60 s to end, then SIGKILL (called from `defer`,
    /// which cannot await: nothing here blocks).
    func close() {
        try? FileIO.writeAll(input, Array("quit\n".utf8))
        process.endDetached(grace: 60)
    }
}
