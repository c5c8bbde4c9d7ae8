import Batch
import Foundation
import LineStore
import Testing

/// A line of stations end to end: separate `bledfu batch` processes on one shared PostgreSQL database and one
/// virtual radio that all of them see, real simulators, one station killed with SIGKILL mid-run.
@Suite(.serialized, .enabled(if: TestLineDatabase.enabled, TestLineDatabase.skipReason))
struct LineCLITests {
    /// 3 stations, 25 devices of two classes, station 2 killed (SIGKILL) while it has devices in flight. The other
    /// two take its devices over when its lease runs out; afterwards every device runs the new image, has exactly one
    /// final record, and the simulator's log (which process connected to which device) shows that no device was
    /// worked on by two stations: per device, the connecting stations never alternate, and the only hand-over is
    /// from the killed station, after the kill.
    @Test(.timeLimit(.minutes(6))) func threeStationsOneKilledMidRun() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let database = try await TestLineDatabase()
        // 12 bracelets, 12 sensors, and one more bracelet whose advertised (and GATT) name is markup: the dashboard
        // must show it as text. One simulator: its log names every link's process.
        let hostile = try line.profile("bracelet", name: Self.hostileName, address: "C6:05:04:03:40:01", file: "hostile.json")
        try line.simulate(["bracelet:12", "sensor:12", hostile], ["--json"], speedup: 6)
        try line.waitForDevices(25)
        let plan = try line.writePlan(expect: 25, connections: 2)
        // Lease 8 s: a station stops itself when no heartbeat has reached the database for 0.6 of its lease, and on
        // a loaded machine (two CPU hogs beside the suite) 4 s leases saw a 2.4 s silence; the kill costs one lease.
        var stations: [StationProcess] = []
        for index in 1...3 {
            let state = line.state.appendingPathComponent("s\(index)")
            try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
            stations.append(try StationProcess(name: "s\(index)", plan: plan, database: database.url, state: state, lease: 8, in: line.directory))
        }
        let victim = stations[1]
        // Kill station 2 once it finished a device and has others in flight (started more than it finished).
        var killedAt: Int?
        for _ in 0..<12_000 where victim.process.isRunning {
            let finished = victim.count("finished")
            if finished >= 1, victim.count("started") > finished {
                kill(victim.pid, SIGKILL)
                killedAt = Int(Date().timeIntervalSince1970 * 1_000_000)
                break
            }
            usleep(20_000)
        }
        let killTime = try #require(killedAt, "station 2 never had a device in flight after its first: \(victim.stderr)")
        _ = victim.wait(timeout: 10)
        for station in [stations[0], stations[2]] {
            let status = station.wait(timeout: 300)
            #expect(status == 0, "\(station.name) exit \(status.map(String.init) ?? "none"): \(station.stderr)\n\(station.events.suffix(5))")
        }

        // One final record per device, all done, at the target version; the killed station's cut attempts were
        // closed by the station that took each device over.
        let log = try await database.open()
        let records = try await log.devices(batch: "line")
        let attempts = try await log.attempts(batch: "line")
        await log.close()
        #expect(records.count == 25)
        #expect(Set(records.map(\.address)).count == 25)
        #expect(records.contains { $0.name == Self.hostileName }, "the markup name was recorded as the device gave it")
        // A device whose update the killed station's child completed just before the kill is found at the target
        // version by the station that takes it over, and recorded as skipped: it is never updated twice.
        for record in records {
            #expect(record.status == .done || record.status == .skipped, "\(record.address): \(record.status) \(record.error ?? "")")
            #expect(record.versionAfter == 2)
            let finals = attempts.filter { $0.address == record.address && ($0.result == .done || $0.result == .skipped) }
            #expect(finals.count == 1, "\(record.address): \(finals.map(\.result))")
            #expect(!attempts.contains { $0.address == record.address && $0.result == .running })
        }
        let cut = attempts.filter { $0.result == .interrupted }
        #expect(!cut.isEmpty && cut.allSatisfy { $0.station == "s2" }, "\(cut.map { "\($0.address) \($0.station ?? "-")" })")
        for attempt in cut {
            let later = attempts.filter { $0.address == attempt.address && $0.id > attempt.id }
            #expect(later.contains { ($0.result == .done || $0.result == .skipped) && $0.station != "s2" }, "\(attempt.address) was taken over")
            #expect(attempt.error?.contains("station s2 stopped renewing its claim") == true, "\(attempt.error ?? "-")")
        }
        #expect(Set(attempts.compactMap(\.station)) == ["s1", "s2", "s3"])

        // Every device runs the new image and completed exactly one update.
        let braceletSHA = try BatchLine.imageSHA("bracelet-app-v2.zip")
        let sensorSHA = try BatchLine.imageSHA("sensor-app-v2.zip")
        for record in records {
            let sha = record.address.hasPrefix("C6") ? braceletSHA : sensorSHA
            let state = line.waitForApplication(record.address, sha256: sha)
            #expect(state.map(BatchLine.applicationSHA) == sha, "\(record.address) runs the new image")
            #expect(BatchLine.updatesCompleted(state) == 1, "\(record.address) updated once")
        }

        // The simulator's log: each connection's station (the station itself probes; its `bledfu flash` children
        // have it as their parent).
        let pids = Dictionary(uniqueKeysWithValues: stations.map { (Int($0.pid), $0.name) })
        let links = LinkEvent.parse(line.simulators.map(\.stdout).joined(separator: "\n"))
        #expect(links.filter { $0.event == "connected" }.count >= 48, "probe and flash links were logged")
        var byDevice: [String: [(station: String, micros: Int)]] = [:]
        for link in links where link.event == "connected" {
            let station = pids[link.pid] ?? link.parent.flatMap { pids[$0] } ?? "unknown pid \(link.pid) parent \(link.parent ?? -1)"
            byDevice[link.identity, default: []].append((station, link.micros))
        }
        #expect(byDevice.count == 25)
        var handedOver = 0
        for (device, connections) in byDevice {
            let order = connections.sorted { $0.micros < $1.micros }
            #expect(order.allSatisfy { pids.values.contains($0.station) }, "\(device): \(order.map(\.station))")
            // The stations in connection order, repeats folded: at most two, and a second only after the first died.
            var runs: [(station: String, first: Int)] = []
            for connection in order where runs.last?.station != connection.station { runs.append((connection.station, connection.micros)) }
            #expect(runs.count <= 2, "\(device) went back and forth: \(runs.map(\.station))")
            if runs.count == 2 {
                handedOver += 1
                #expect(runs[0].station == "s2", "\(device) left \(runs[0].station), which was not killed")
                #expect(runs[1].first > killTime, "\(device) taken over before the kill")
            }
        }
        #expect(handedOver >= 1, "a device of the killed station was finished by another")

        // The line at a glance, and the reports for the line and for one station.
        let status = try await CLIRunner.run(["line", "status", "--db", database.url])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("stations: 0 alive of 3"), "\(status.stdout)")
        let done = records.filter { $0.status == .done }.count
        #expect(status.stdout.contains("devices: 25: done \(done), skipped \(25 - done), failed 0, in flight 0, pending 0"), "\(status.stdout)")
        #expect(status.stdout.contains("yield 100.0 %"), "\(status.stdout)")
        #expect(!status.stdout.contains(database.base.password ?? "\u{0}"), "no password")
        let lineCSV = try await CLIRunner.run(["batch", "report", "--db", database.url])
        #expect(lineCSV.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 26)
        let mine = try await CLIRunner.run(["batch", "report", "--db", database.url, "--station", "s1", "--format", "json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(mine.stdout.utf8)) as? [String: Any])
        let devices = try #require(object["devices"] as? [[String: Any]])
        #expect(devices.count == records.filter { $0.station == "s1" }.count && !devices.isEmpty)
        #expect(devices.allSatisfy { (($0["record"] as? [String: Any])?["station"] as? String) == "s1" })
        if BrowserSession.available { try checkDashboard(database.url, done: done) }
        await database.drop()
    }

    static let hostileName = "Bracelet<script>x</script>"

    /// The dashboard on the line the stations left: its counts are the database's, the three stations are listed,
    /// and the device that advertised markup as its name is shown as those characters.
    func checkDashboard(_ url: String, done: Int) throws {
        let server = try DashboardServer(location: url)
        defer { server.stop() }
        let port = try #require(server.waitForPort(), "line serve did not start: \(server.stderr)")
        let browser = try BrowserSession()
        defer { browser.close() }
        try browser.open("http://127.0.0.1:\(port)/")
        try browser.wait("document.getElementById('count-done').textContent === '\(done)'")
        #expect(try browser.eval("document.getElementById('count-skipped').textContent") as? String == "\(25 - done)")
        let stations = try browser.eval("document.querySelector('#stations tbody').innerText") as? String ?? ""
        #expect(["s1", "s2", "s3"].allSatisfy { stations.contains($0) }, "\(stations)")
        let names = try browser.eval("Array.from(document.querySelectorAll('#recent tbody tr td:first-child')).map(c => c.textContent)") as? [String] ?? []
        #expect(names.contains(Self.hostileName), "\(names)")
        #expect(try browser.eval("document.scripts.length") as? Int == 1)
        #expect(try browser.eval("document.title") as? String == "bledfu line")
        try browser.screenshot(CLIRunner.outputDirectory.appendingPathComponent("line-three-stations.png").path)
    }

    /// Bad input: a wrong or unreachable database URL, a newer schema, two live stations with one name, and a plan
    /// that differs from the line's: one clear line each, with its documented exit code.
    @Test(.timeLimit(.minutes(3))) func badLineInputGetsOneLineAndItsExitCode() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let plan = try line.writePlan(expect: 1, connections: 1)
        let database = try await TestLineDatabase()

        // Unreachable (nothing listens on port 1) and malformed URLs: exit 53; the password never printed.
        let unreachable = try await CLIRunner.run(["batch", plan, "--db", "postgres://bledfu:s3cret@127.0.0.1:1/x", "--state-dir", line.state.path])
        #expect(unreachable.status == 53, "\(unreachable.stderr)")
        #expect(unreachable.stderr.contains("cannot connect to the line database postgres://bledfu@127.0.0.1:1/x"))
        #expect(!unreachable.stderr.contains("s3cret"))
        #expect(unreachable.stderr.split(separator: "\n").count == 1, "\(unreachable.stderr)")
        let malformed = try await CLIRunner.run(["line", "status", "--db", "postgres://127.0.0.1/x"])
        #expect(malformed.status == 53 && malformed.stderr.contains("bad database URL"), "\(malformed.stderr)")
        var wrong = database.base
        wrong.password = "not-the-password"
        wrong.database = database.name
        let refused = try await CLIRunner.run(["line", "status", "--db", wrong.string])
        #expect(refused.status == 53, "\(refused.stderr)")
        #expect(refused.stderr.contains("password authentication failed"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("not-the-password"))

        // A live station s1 of another host, with another plan: a second s1 is exit 57, and a station s2 with this
        // plan (which differs from the live station's) is exit 58.
        let log = try await database.open()
        _ = try await log.startRun(
            batch: "line", station: StationInfo(name: "s1", host: "elsewhere", pid: 1, adapters: "hci0×1", planHash: "another", lease: 600),
            force: false, at: Date())
        let twin = try await CLIRunner.run(["batch", plan, "--db", database.url, "--station", "s1", "--state-dir", line.state.path])
        #expect(twin.status == 57, "\(twin.stderr)")
        #expect(twin.stderr.contains("station name 's1' is in use"), "\(twin.stderr)")
        let other = try await CLIRunner.run(["batch", plan, "--db", database.url, "--station", "s2", "--state-dir", line.state.path])
        #expect(other.status == 58, "\(other.stderr)")
        #expect(other.stderr.contains("differs from the line's"), "\(other.stderr)")
        // A newer schema: exit 56 for batch, report, status and serve alike.
        try await log.database.transaction(write: true) { s in
            try await s.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 'later')", [.int(LineSchema.current + 1)])
        }
        await log.close()
        for arguments in [
            ["batch", plan, "--db", database.url, "--state-dir", line.state.path], ["batch", "report", "--db", database.url],
            ["line", "status", "--db", database.url], ["line", "serve", "--db", database.url, "--listen", "127.0.0.1:0"],
        ] {
            let result = try await CLIRunner.run(arguments)
            #expect(result.status == 56, "\(arguments[0]) \(arguments[1]): \(result.stderr)")
            #expect(result.stderr.contains("schema version \(LineSchema.current + 1)"), "\(result.stderr)")
        }
        await database.drop()
    }
}
