import Foundation
import LinuxIO
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Ctrl-C during `bledfu batch` (issue 19 point 2), end to end: a real `bledfu batch` with three virtual bracelets
/// on a `bledfu simulate`, SIGINT sent to the batch process alone (its flash children run in process groups of their
/// own, so only the batch's forwarding can reach them).
@Suite("Batch Ctrl-C with real processes", .serialized, .timeLimit(.minutes(8)))
struct BatchInterruptTests {
    /// A running `bledfu batch --json` and the lines it has written so far, read on a thread of its own. Decisions
    /// on what it printed (send Ctrl-C now) are taken off the cooperative pool too (``when(_:timeout:then:)``): on a
    /// loaded machine a task waiting for the pool lagged behind the batch by tens of seconds, long enough for the
    /// devices to finish before the Ctrl-C meant for their upload.
    final class RunningBatch: Sendable {
        let child: ChildProcess
        private final class Output: Sendable {
            let state = Mutex<(lines: [String], ended: Bool)>(([], false))
        }
        private let box = Output()

        init(_ arguments: [String], standardError: ChildProcess.Redirect = .inherit) throws {
            let pipe = try ChildProcess.makePipe()
            defer { _ = system_close(pipe.write) }
            var environment = ProcessInfo.processInfo.environment
            environment["BLEDFU_FIRMWARE_DIR"] = CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path
            child = try ChildProcess.spawn(
                CLIRunner.binary.path, arguments: arguments, environment: environment, standardOutput: .descriptor(pipe.write),
                standardError: standardError)
            let fd = pipe.read
            let box = self.box
            Thread {
                let output = box
                var partial: [UInt8] = []
                while true {
                    let chunk = (try? BlockingRead.chunk(fd: fd)) ?? []
                    if chunk.isEmpty { break }
                    partial += chunk
                    var lines: [String] = []
                    while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                        lines.append(String(decoding: partial[..<newline], as: UTF8.self))
                        partial.removeSubrange(...newline)
                    }
                    output.state.withLock { $0.lines += lines }
                }
                _ = system_close(fd)
                output.state.withLock { $0.ended = true }
            }.start()
        }

        deinit { child.signal(SIGKILL) }

        var lines: [String] { box.state.withLock { $0.lines } }
        var ended: Bool { box.state.withLock { $0.ended } }

        /// Off the pool: polls (every 10 ms, at most `timeout` s) until `condition` holds on the lines so far, then
        /// runs `action` at once on that thread. False when it never held (the output ended or the time ran out).
        func when(
            _ condition: @escaping @Sendable ([String]) -> Bool, timeout: TimeInterval = 180, then action: @escaping @Sendable () -> Void = {}
        ) async -> Bool {
            (try? await OffPool.run { [self] () -> Bool in
                var held = false
                OffPool.blockingPoll(seconds: timeout) {
                    let (lines, ended) = box.state.withLock { ($0.lines, $0.ended) }
                    if condition(lines) {
                        action()
                        held = true
                    }
                    return held || ended
                }
                return held
            }) ?? false
        }

        /// Waits (without holding a thread, at most `timeout` s) until the output has ended.
        func waitForEnd(timeout: TimeInterval = 240) async -> Bool {
            await OffPool.poll(timeout: .seconds(timeout)) { ended }
        }

        static func events(_ name: String, in lines: [String]) -> [[String: Any]] {
            lines.compactMap { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
                return object["event"] as? String == name ? object : nil
            }
        }

        func events(_ name: String) -> [[String: Any]] { Self.events(name, in: lines) }
    }

    static let devices = ["C6:05:04:03:02:01", "C6:05:04:03:03:01", "C6:05:04:03:04:01"]

    /// Three bracelets, slow enough (speedup 1, flash 12x slower) that a Ctrl-C finds all three uploading even when
    /// this test lags behind them on a loaded machine.
    static func line(faults: [String] = ["slow-flash=12"]) async throws -> (BatchLine, String) {
        let line = try BatchLine()
        try line.simulate(["bracelet:3"], faults.flatMap { ["--fault", $0] }, speedup: 1)
        try await line.waitForDevices(3)
        let plan = try line.writePlan(expect: 3, connections: 3, retries: 0)
        return (line, plan)
    }

    /// Whether every device has reported uploaded bytes and its `bledfu flash` child still runs (looked up live in
    /// /proc), with a journal each when `journals` is given.
    static func allUploading(_ lines: [String], stateDirectory: URL, journals: Bool = false) -> Bool {
        let uploading = Set(
            RunningBatch.events("progress", in: lines).filter { ($0["bytes"] as? Int ?? 0) > 0 }.compactMap { $0["address"] as? String })
        guard uploading.count == devices.count, flashChildren(stateDirectory: stateDirectory).count == devices.count else { return false }
        guard journals else { return true }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: stateDirectory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.count == devices.count
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
        let (line, plan) = try await Self.line()
        defer { line.cleanUp() }
        let errors = line.state.deletingLastPathComponent().appendingPathComponent("batch.err")
        let errorsFD = try FileIO.create(errors.path)
        let batch = try RunningBatch(["batch", plan, "--json"] + line.batchArguments, standardError: .descriptor(errorsFD))
        _ = system_close(errorsFD)
        let state = line.state
        let child = batch.child
        let sent = await batch.when({ Self.allUploading($0, stateDirectory: state) }, then: { child.signal(SIGINT) })
        #expect(sent, "not all three uploading: \(batch.lines.suffix(5))")
        // The message comes before any device finishes.
        #expect(await batch.when({ lines in lines.contains { $0.contains("\"event\":\"message\"") && $0.contains("stopping") } }))
        let lines = batch.lines
        let stopping = try #require(lines.firstIndex { $0.contains("\"event\":\"message\"") && $0.contains("stopping") })
        #expect(!lines[..<stopping].contains { $0.contains("\"event\":\"finished\"") })
        #expect(lines[stopping].contains("3 running device(s) stop at their next safe point and stay pending"))
        #expect(lines[stopping].contains("(Ctrl-C again quits at once)"))
        #expect(await batch.waitForEnd())
        #expect(await batch.child.wait(timeout: .seconds(120)) == .exited(130))
        // One error line saying how to go on (docs/batch.md "Ctrl-C").
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        let errorLines = stderr.split(separator: "\n").filter { $0.hasPrefix("bledfu: error:") }
        #expect(errorLines == ["bledfu: error: interrupted; run the same command again to finish"], "\(stderr)")
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
        let (line, plan) = try await Self.line(faults: ["stall-at=before-execute-data#2"])
        defer { line.cleanUp() }
        let stderrPath = line.directory.appendingPathComponent("batch.err").path
        let stderr = try FileIO.create(stderrPath)
        let batch = try RunningBatch(["batch", plan, "--json"] + line.batchArguments, standardError: .descriptor(stderr))
        try FileIO.close(stderr)
        // Each device has a journal (its first executed object) before the Ctrl-Cs: the kill must leave them. The
        // devices stall before their second Execute, so no safe point comes on its own: only the second Ctrl-C can end
        // the flashes, however late either signal lands.
        let state = line.state
        let child = batch.child
        let seen = Mutex<[pid_t]>([])
        let sent = await batch.when({ Self.allUploading($0, stateDirectory: state, journals: true) }) {
            seen.withLock { $0 = Self.flashChildren(stateDirectory: state) }
            child.signal(SIGINT)
        }
        #expect(sent, "not all three uploading with a journal: \(batch.lines.suffix(5))")
        let journalsBefore = try FileManager.default.contentsOfDirectory(atPath: line.state.path).filter { $0.hasSuffix(".json") }
        #expect(journalsBefore.count == 3, "\(journalsBefore)")
        #expect(await batch.when({ lines in lines.contains { $0.contains("stopping") } }, then: { child.signal(SIGINT) }))
        #expect(await batch.child.wait(timeout: .seconds(60)) == .exited(130))
        let errors = String(decoding: try FileIO.read(stderrPath), as: UTF8.self)
        #expect(errors.contains("bledfu: killed 3 running flash(es); their journals are kept"), "\(errors)")
        // SIGKILL reaches each child at once; it is gone (a zombie has no command line) within the bound.
        let children = seen.withLock { $0 }
        #expect(children.count == 3)
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
