import Foundation
import LinuxIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Ctrl-C during `bledfu batch` (issue 19 point 2), end to end: a real `bledfu batch` with three virtual bracelets
/// on a `bledfu simulate`, SIGINT sent to the batch process alone (its flash children run in process groups of their
/// own, so only the batch's forwarding can reach them).
@Suite("Batch Ctrl-C with real processes", .serialized, .timeLimit(.minutes(8)))
struct BatchInterruptTests {
    /// A running `bledfu batch --json` and the lines it has written so far.
    final class RunningBatch {
        let child: ChildProcess
        let reader: PipeReader
        private(set) var lines: [String] = []
        private var partial: [UInt8] = []
        private(set) var ended = false

        init(_ arguments: [String], standardError: ChildProcess.Redirect = .inherit) throws {
            let pipe = try ChildProcess.makePipe()
            defer { _ = system_close(pipe.write) }
            var environment = ProcessInfo.processInfo.environment
            environment["BLEDFU_FIRMWARE_DIR"] = CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path
            child = try ChildProcess.spawn(
                CLIRunner.binary.path, arguments: arguments, environment: environment, standardOutput: .descriptor(pipe.write),
                standardError: standardError)
            reader = try PipeReader(fd: pipe.read)
        }

        deinit {
            child.signal(SIGKILL)
            reader.close()
        }

        /// Reads until `condition` holds on the lines read so far, or the output ends, or `timeout` passes.
        @discardableResult
        func read(until condition: ([String]) -> Bool, timeout: Duration = .seconds(180)) async -> Bool {
            let deadline = ContinuousClock.now.advanced(by: timeout)
            while !condition(lines) {
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard !ended, remaining > .zero, let chunk = try? await reader.read(timeout: remaining) else { return condition(lines) }
                if chunk.isEmpty { ended = true }
                partial += chunk
                while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: partial[..<newline], as: UTF8.self))
                    partial.removeSubrange(...newline)
                }
            }
            return true
        }

        func events(_ name: String) -> [[String: Any]] {
            lines.compactMap { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
                return object["event"] as? String == name ? object : nil
            }
        }
    }

    static let devices = ["C6:05:04:03:02:01", "C6:05:04:03:03:01", "C6:05:04:03:04:01"]

    /// Three bracelets, slow enough (speedup 1, flash 4x slower) that a Ctrl-C finds all three uploading.
    static func line() throws -> (BatchLine, String) {
        let line = try BatchLine()
        try line.simulate(["bracelet:3"], ["--fault", "slow-flash=4"], speedup: 1)
        try line.waitForDevices(3)
        let plan = try line.writePlan(expect: 3, connections: 3, retries: 0)
        return (line, plan)
    }

    /// Waits until every device reports uploaded bytes.
    static func allUploading(_ batch: RunningBatch) async -> Bool {
        await batch.read(until: { _ in
            let uploading = Set(batch.events("progress").filter { ($0["bytes"] as? Int ?? 0) > 0 }.compactMap { $0["address"] as? String })
            return uploading.count == devices.count
        })
    }

    /// Live `bledfu flash` children of this batch (their command lines name its state directory).
    static func flashChildren(stateDirectory: URL) -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { name -> pid_t? in
            guard let pid = pid_t(name), let data = FileManager.default.contents(atPath: "/proc/\(name)/cmdline") else { return nil }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return arguments.contains("flash") && arguments.contains(stateDirectory.path) ? pid : nil
        }
    }

    @Test("First Ctrl-C: the line says at once it is stopping, every running flash stops at a safe point and stays pending; the same command finishes them")
    func firstInterruptStopsAtSafePoints() async throws {
        let (line, plan) = try Self.line()
        defer { line.cleanUp() }
        let batch = try RunningBatch(["batch", plan, "--json"] + line.batchArguments)
        #expect(await Self.allUploading(batch), "not all three uploading: \(batch.lines.suffix(5))")
        #expect(Self.flashChildren(stateDirectory: line.state).count == 3)
        batch.child.signal(SIGINT)
        // The message comes before any device finishes.
        #expect(await batch.read(until: { lines in lines.contains { $0.contains("\"event\":\"message\"") && $0.contains("stopping") } }))
        let stopping = try #require(batch.lines.firstIndex { $0.contains("\"event\":\"message\"") && $0.contains("stopping") })
        #expect(!batch.lines[..<stopping].contains { $0.contains("\"event\":\"finished\"") })
        #expect(batch.lines[stopping].contains("3 running device(s) stop at their next safe point and stay pending"))
        await batch.read(until: { _ in false })
        #expect(batch.ended)
        #expect(await batch.child.wait(timeout: .seconds(120)) == .exited(130))
        let result = try #require(batch.events("result").last)
        #expect(result["interrupted"] as? Bool == true)
        #expect(result["pending"] as? Int == 3)
        let report = try await line.report()
        for device in Self.devices {
            let entry = try #require(report[device], "no record for \(device)")
            #expect(entry.record["status"] as? String == "pending", "\(device): \(entry.record)")
            #expect(entry.attempts.last?["result"] as? String == "interrupted", "\(device): \(entry.attempts)")
        }
        // Each device keeps a journal: the next run resumes instead of starting over.
        let journals = try FileManager.default.contentsOfDirectory(atPath: line.state.path).filter { $0.hasSuffix(".json") }
        #expect(journals.count == 3, "\(journals)")
        #expect(Self.flashChildren(stateDirectory: line.state).isEmpty)
        // How to continue: the same command.
        let again = try await CLIRunner.run(["batch", plan, "--json"] + line.batchArguments, timeout: 300)
        #expect(again.status == 0, "\(again.stderr)")
        let finished = try await line.report()
        for device in Self.devices {
            #expect(finished[device]?.record["status"] as? String == "done", "\(device): \(String(describing: finished[device]?.record))")
        }
    }

    @Test("Second Ctrl-C: the batch ends at once, its flash children are killed, their journals stay")
    func secondInterruptEndsAtOnce() async throws {
        let (line, plan) = try Self.line()
        defer { line.cleanUp() }
        let stderrPath = line.directory.appendingPathComponent("batch.err").path
        let stderr = try FileIO.create(stderrPath)
        let batch = try RunningBatch(["batch", plan, "--json"] + line.batchArguments, standardError: .descriptor(stderr))
        try FileIO.close(stderr)
        #expect(await Self.allUploading(batch))
        // Each device has a journal (its first executed object) before the Ctrl-Cs: the kill must leave them.
        var journalsBefore: [String] = []
        for _ in 0..<1200 {
            journalsBefore = try FileManager.default.contentsOfDirectory(atPath: line.state.path).filter { $0.hasSuffix(".json") }
            if journalsBefore.count == 3 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(journalsBefore.count == 3, "\(journalsBefore)")
        let children = Self.flashChildren(stateDirectory: line.state)
        #expect(children.count == 3)
        batch.child.signal(SIGINT)
        #expect(await batch.read(until: { lines in lines.contains { $0.contains("stopping") } }))
        batch.child.signal(SIGINT)
        #expect(await batch.child.wait(timeout: .seconds(60)) == .exited(130))
        let errors = String(decoding: try FileIO.read(stderrPath), as: UTF8.self)
        #expect(errors.contains("bledfu: killed 3 running flash(es); their journals are kept"), "\(errors)")
        // SIGKILL reaches each child at once; it is gone (a zombie has no command line) within the bound.
        var left = children
        for _ in 0..<600 where !left.isEmpty {
            left = Self.flashChildren(stateDirectory: line.state).filter(children.contains)
            if !left.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(left.isEmpty, "flash children still running: \(left)")
        let journals = try FileManager.default.contentsOfDirectory(atPath: line.state.path).filter { $0.hasSuffix(".json") }
        #expect(Set(journals) == Set(journalsBefore), "\(journals)")
    }
}
