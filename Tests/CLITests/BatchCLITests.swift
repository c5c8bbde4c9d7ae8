import ArgumentParser
@testable import Batch
import Foundation
import LinuxIO
import Synchronization
import Testing

@testable import BledfuCLI

/// `bledfu batch` end to end: real simulators on a virtual radio, the real binary, a real SQLite file.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BatchCLITests {
    @Test func optionsParse() throws {
        let run = try BatchRun.parse(["line.yaml", "--db", "x.sqlite", "--force", "--json", "--state-dir", "/tmp/s"])
        #expect(run.plan == "line.yaml" && run.db == "x.sqlite" && run.force && run.json && run.stateDir == "/tmp/s")
        #expect(!run.check)
        let report = try BatchReport.parse(["--format", "junit", "--output", "r.xml"])
        #expect(report.format == .junit && report.output == "r.xml")
        #expect(throws: (any Error).self) { try BatchReport.parse(["--format", "xml"]) }
        #expect(throws: (any Error).self) { try BatchRun.parse([]) }
        #expect(BatchExit.table.map(\.0) == [0, 50, 51, 52, 53, 54, 56, 57, 58, 59, 60, 61, 130])
    }

    /// `bledfu flash --json` events become progress and an outcome (the cause, the exit code, retry or not).
    @Test func flashEventsBecomeProgressAndOutcomes() {
        let seen = Mutex<[DeviceProgress]>([])
        let parser = FlashEventParser(total: 1000) { progress in seen.withLock { $0.append(progress) } }
        for line in [
            #"{"event":"state","state":"bootloader","address":"C6:05:04:03:02:02"}"#,
            #"{"event":"progress","part":1,"parts":2,"bytes":500,"total":1000,"percent":50}"#,
            "not json",
            #"{"event":"result","success":false,"exitCode":43,"bytesSent":500,"bytesResent":20,"message":"link lost"}"#,
        ] {
            parser.consume(Data(line.utf8))
        }
        #expect(seen.withLock { $0 }.map(\.stage) == ["bootloader", "uploading"])
        #expect(seen.withLock { $0 }.last == DeviceProgress(stage: "uploading", bytes: 500, total: 1000, part: 1, parts: 2))
        let failed = parser.outcome(exitStatus: 43, logPath: "x.log")
        #expect(!failed.success && failed.retryable && !failed.interrupted)
        #expect(failed.error == "link lost [exit 43]")
        #expect(failed.exitCode == 43 && failed.bytes == 500 && failed.resends == 20)

        let invalid = FlashEventParser(total: 1) { _ in }
        invalid.consume(Data(#"{"event":"result","success":false,"exitCode":31,"message":"bad signature"}"#.utf8))
        #expect(invalid.outcome(exitStatus: 31, logPath: "x.log").retryable == false)
        let stopped = FlashEventParser(total: 1) { _ in }
        #expect(stopped.outcome(exitStatus: 130, logPath: "x.log").interrupted)
        #expect(stopped.outcome(exitStatus: 9, logPath: "x.log").error?.contains("exited with 9") == true)
        let ok = FlashEventParser(total: 1) { _ in }
        ok.consume(Data(#"{"event":"result","success":true,"exitCode":0,"bytesSent":1000,"bytesResent":0}"#.utf8))
        #expect(ok.outcome(exitStatus: 0, logPath: "x.log") == FlashOutcome(success: true, exitCode: 0, bytes: 1000, resends: 0))
    }

    /// A report without a database is exit 53.
    @Test func reportWithoutADatabaseFails() async throws {
        let result = try await CLIRunner.run(["batch", "report", "--db", "/nonexistent/batch.sqlite"])
        #expect(result.status == 53, "\(result.stderr)")
        #expect(result.stderr.contains("no batch database"))
    }

    /// A mistyped scheme (`postgress://`) is not an SQLite file name: batch, report, status and serve refuse it with
    /// exit 53 on one line that shows the URL without its password.
    @Test func aMistypedDatabaseSchemeIsRefusedWithoutThePassword() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let plan = try line.writePlan(expect: 1, connections: 1)
        // The plan's `db:` is checked the same way.
        let text = try String(contentsOfFile: plan, encoding: .utf8)
        let typo = line.directory.appendingPathComponent("typo.yaml")
        try Data((text + "db: postgress://u:secret@h/db\n").utf8).write(to: typo)
        let fromPlan = try await CLIRunner.run(["batch", typo.path, "--state-dir", line.state.path])
        #expect(fromPlan.status == 53 && fromPlan.stderr.contains("postgress://u:***@h/db"), "\(fromPlan.stderr)")
        #expect(!fromPlan.stderr.contains("secret"), "\(fromPlan.stderr)")
        let urls = ["postgress://u:secret@h/db", "mysql://u:se@cret@h:3306/db", "file://u:secret@/tmp/x.sqlite"]
        for url in urls {
            for arguments in [
                ["batch", plan, "--db", url, "--state-dir", line.state.path], ["batch", "report", "--db", url],
                ["line", "status", "--db", url], ["line", "serve", "--db", url, "--listen", "127.0.0.1:0"],
            ] {
                let result = try await CLIRunner.run(arguments)
                #expect(result.status == 53, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("unsupported database URL scheme"), "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("u:***@"), "\(arguments): \(result.stderr)")
                #expect(!result.stderr.contains("secret") && !result.stderr.contains("cret"), "\(arguments): \(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
                #expect(result.stdout.isEmpty, "\(arguments): \(result.stdout)")
            }
        }
    }

    /// A bad plan is rejected with its line before anything connects (the adapter directory does not even exist).
    @Test func aBadPlanIsRejectedWithItsLine() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let plan = line.directory.appendingPathComponent("bad.yaml")
        try Data(
            """
            adapters:
              - name: virtual:/nonexistent/radio
                connections: 2
            classes:
              bracelet:
                package: ../nowhere/app.zip
            devices:
              - address: C6:05:04:03:02:01
                class: bracelet
                colour: blue

            """.utf8
        ).write(to: plan)
        let result = try await CLIRunner.run(["batch", plan.path] + line.batchArguments)
        #expect(result.status == 51, "\(result.stderr)")
        #expect(result.stderr.contains("line 10: unknown key 'colour'"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: line.database.path), "nothing opened before the plan was valid")

        // Valid YAML, but the package does not exist: still exit 51, naming the class's line.
        try Data(String(decoding: try Data(contentsOf: plan), as: UTF8.self).replacingOccurrences(of: "    colour: blue\n", with: "").utf8)
            .write(to: plan)
        let missing = try await CLIRunner.run(["batch", plan.path] + line.batchArguments)
        #expect(missing.status == 51, "\(missing.stderr)")
        #expect(missing.stderr.contains("line 6: class 'bracelet'"), "\(missing.stderr)")

        let good = try line.writePlan(expect: 1, connections: 1)
        let check = try await CLIRunner.run(["batch", good, "--check"] + line.batchArguments)
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.contains("plan OK: 1 adapter(s), 1 connection(s), 2 class(es)"))
    }

    /// 16 virtual devices (12 plain bracelets and sensors; 3 that drop the link part-way; 1 whose hardware version
    /// no package matches) in one run on two adapters: every device's image is correct or its failure is recorded
    /// with the cause.
    @Test(.timeLimit(.minutes(3))) func sixteenDevicesInOneBatch() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        try line.simulate(["bracelet:6", "sensor:6"], speedup: 20)
        let braceletF = try line.profile("bracelet", name: "BraceletF", address: "C6:05:04:03:20:01")
        let sensorF = try line.profile("sensor", name: "SensorF", address: "D2:C3:B4:A5:20:87")
        try line.simulate(["\(braceletF):2", sensorF], ["--fault", "disconnect-after-bytes=12000"], speedup: 20)
        let braceletH = try line.profile("bracelet", name: "BraceletH", address: "C6:05:04:03:30:01")
        try line.simulate([braceletH], ["--hw-version", "99"], speedup: 20)
        try await line.waitForDevices(16)
        // Two slot pools on one virtual adapter whose controller carries 5 links: 5 each (more is refused, exit 51).
        let plan = try line.writePlan(expect: 16, connections: 5, adapters: 2)

        let result = try await CLIRunner.run(["batch", plan, "--json"] + line.batchArguments, timeout: 150)
        #expect(result.status == 50, "exit \(result.status): \(result.stderr)\n\(result.stdout.suffix(3000))")
        let events = CLIRunner.events(result)
        let final = try #require(events.last { $0["event"] as? String == "result" })
        #expect(final["done"] as? Int == 15)
        #expect(final["failed"] as? Int == 1)
        #expect(final["remaining"] as? Int == 0)
        // Both adapter entries carried links.
        let adapters = Set(events.compactMap { $0["event"] as? String == "started" ? $0["adapter"] as? String : nil })
        #expect(adapters == ["virtual:\(line.radio.path)", "virtual:\(line.radio.path)#2"])
        #expect(events.contains { $0["event"] as? String == "totals" && $0["ratePerHour"] as? Double != nil })

        let report = try await line.report()
        #expect(report.count == 16)
        let braceletSHA = try await BatchLine.imageSHA("bracelet-app-v2.zip")
        let sensorSHA = try await BatchLine.imageSHA("sensor-app-v2.zip")
        for (address, entry) in report {
            let status = entry.record["status"] as? String
            if address == "C6:05:04:03:30:01" {
                #expect(status == "failed")
                let error = entry.record["error"] as? String ?? ""
                // Refused before the jump from its Hardware Revision (exit 48), and not tried again: the device would
                // refuse it every time. An attempt the adapter's controller refused (exit 21 or 22: back-pressure,
                // docs/batch.md) is recorded but is no try.
                #expect(error.contains("[exit 48]") && error.lowercased().contains("hardware"), "\(error)")
                let reached = entry.attempts.filter { ![21, 22].contains($0["exitCode"] as? Int ?? 0) }
                #expect(reached.count == 1, "no retry: \(entry.attempts)")
                #expect(BatchLine.updatesCompleted(line.deviceStates()[address]) == 0)
                #expect(line.deviceStates()[address]?["mode"] as? String == "app")
                continue
            }
            #expect(status == "done", "\(address): \(entry.record)")
            #expect(entry.record["versionBefore"] as? Int == 1)
            #expect(entry.record["versionAfter"] as? Int == 2)
            #expect((entry.record["bytes"] as? Int ?? 0) > 0)
            #expect((entry.record["packageSHA256"] as? String)?.count == 64)
            let sha = address.hasPrefix("C6") ? braceletSHA : sensorSHA
            let state = await line.waitForApplication(address, sha256: sha)
            #expect(state.map(BatchLine.applicationSHA) == sha, "\(address) runs the new image")
            #expect(BatchLine.updatesCompleted(state) == 1, "\(address) updated once")
        }
        // The link drops were survived inside one attempt (flash reconnects and resumes).
        for address in ["C6:05:04:03:20:01", "C6:05:04:03:21:01", "D2:C3:B4:A5:20:87"] {
            #expect(report[address]?.record["status"] as? String == "done")
            let faults = (line.deviceStates()[address]?["counters"] as? [String: Any])?["faults_fired"] as? Int
            #expect((faults ?? 0) >= 1, "\(address): the fault fired")
        }

        // Exports: CSV has a header and 16 rows; JUnit names one failure.
        let csv = try await CLIRunner.run(["batch", "report", "--db", line.database.path])
        #expect(csv.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 17, "\(csv.stdout.prefix(300))")
        let junit = try await CLIRunner.run(["batch", "report", "--db", line.database.path, "--format", "junit"])
        #expect(junit.stdout.contains("tests=\"16\" failures=\"1\""), "\(junit.stdout.prefix(400))")
    }

    /// kill -9 in the middle of a batch, then the same command again: every device ends with exactly one record,
    /// done at the target version, and no device completed an update twice.
    @Test(.timeLimit(.minutes(3))) func killNineMidBatchThenRerunFinishesWithoutReflashing() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        try line.simulate(["bracelet:4", "sensor:4"], speedup: 4)
        try await line.waitForDevices(8)
        let plan = try line.writePlan(expect: 8, connections: 4)
        let output = line.directory.appendingPathComponent("first.out")
        let first = try SpawnedProcess(CLIRunner.binary, ["batch", plan, "--json"] + line.batchArguments, stdout: output)
        // Kill it as soon as one device finished (the others are mid-flight).
        var killed = false
        for _ in 0..<6000 where first.isRunning {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            if text.contains("\"event\":\"finished\"") {
                first.child.signal(SIGKILL)
                killed = true
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        await first.waitForExit()
        #expect(killed, "the first run ended before any device finished")
        #expect(first.terminationStatus == 128 + SIGKILL)
        let before = try await line.report()
        #expect(before.values.contains { $0.record["status"] as? String == "done" })
        #expect(before.values.contains { ["running", "pending"].contains($0.record["status"] as? String ?? "") }, "killed mid-batch")

        let rerun = try await CLIRunner.run(["batch", plan] + line.batchArguments, timeout: 120)
        #expect(rerun.status == 0, "\(rerun.stderr)\n\(rerun.stdout)")
        let report = try await line.report()
        #expect(report.count == 8)
        let states = line.deviceStates()
        for (address, entry) in report {
            #expect(["done", "skipped"].contains(entry.record["status"] as? String ?? ""), "\(address): \(entry.record)")
            #expect(entry.record["versionAfter"] as? Int == 2)
            #expect(entry.attempts.filter { $0["result"] as? String == "done" }.count <= 1, "\(address) flashed twice")
            #expect(entry.attempts.filter { $0["result"] as? String == "running" }.isEmpty)
            #expect(BatchLine.updatesCompleted(states[address]) == 1, "\(address) completed \(BatchLine.updatesCompleted(states[address]) ?? -1) updates")
        }
        // A third run touches nothing.
        let third = try await CLIRunner.run(["batch", plan, "--json"] + line.batchArguments, timeout: 120)
        #expect(third.status == 0, "\(third.stderr)")
        let events = CLIRunner.events(third)
        #expect(!events.contains { $0["event"] as? String == "started" })
        let result = events.last { $0["event"] as? String == "result" }
        #expect((result?["done"] as? Int ?? 0) + (result?["skipped"] as? Int ?? 0) == 8, "\(result ?? [:])")
    }
}
