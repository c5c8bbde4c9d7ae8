import BLECore
@testable import Batch
import Foundation
import GATT
import LinuxIO
import Synchronization
import TestDoubles
import Testing

@testable import BledfuCLI

/// A device's `bledfu flash` child that stops answering (hung, or stopped with SIGSTOP) is killed after the plan's
/// `flash.stall_timeout` and the attempt fails with exit code 59 (retryable): the line never waits forever on a child.
/// The children are shell scripts standing in for `bledfu` that print one event and then go silent.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BatchStallTests {
    static func job(stallTimeout: Double) throws -> FlashJob {
        var options = BatchPlan.FlashOptions()
        options.stallTimeout = stallTimeout
        let address = try #require(BluetoothAddress("C6:05:04:03:02:01"))
        return FlashJob(
            target: BatchTarget(peer: PeerAddress(address, type: .random), className: "bracelet"),
            package: PackageInfo(path: "/nonexistent.zip", sha256: "00", targetVersion: 2, totalBytes: 100),
            adapter: BatchPlan.Adapter(name: "virtual:/nonexistent", connections: 1), attempt: 1, bootloaderName: nil,
            options: options)
    }

    /// A stand-in `bledfu` that prints the `connecting` state and then runs `then`.
    static func child(in directory: URL, then: String) throws -> URL {
        let url = directory.appendingPathComponent("bledfu")
        let script = """
            #!/bin/sh
            echo '{"event":"state","state":"connecting"}'
            \(then)

            """
        // Written through a close-on-exec descriptor: a child another test spawns meanwhile cannot inherit it open for
        // writing, which would make this script's exec fail with ETXTBSY ("Text file busy").
        let fd = try FileIO.create(url.path, mode: 0o755)
        try FileIO.writeAll(fd, Array(script.utf8))
        try FileIO.close(fd)
        return url
    }

    func run(then: String, stallTimeout: Double = 1) async throws -> (FlashOutcome, [String], String) {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let flasher = ProcessFlasher(
            executable: try Self.child(in: directory, then: then),
            stateDirectory: directory.appendingPathComponent("state"),
            logDirectory: directory.appendingPathComponent("logs"), makeAdapter: makeFlashAdapter)
        let stages = StageRecorder()
        let outcome = await flasher.flash(try Self.job(stallTimeout: stallTimeout)) { stages.add($0.stage) }
        let log = (try? String(contentsOf: directory.appendingPathComponent("logs/C6-05-04-03-02-01.log"), encoding: .utf8)) ?? ""
        return (outcome, stages.all, log)
    }

    @Test func aChildThatHangsIsKilledAndTheAttemptFailsWith59() async throws {
        let (outcome, stages, log) = try await run(then: "exec sleep 600")
        #expect(stages == ["connecting"])
        #expect(!outcome.success)
        #expect(outcome.exitCode == 59)
        #expect(outcome.retryable)
        #expect(outcome.error == "bledfu flash stopped answering (no event for 1 s) and was killed [exit 59]")
        #expect(log.contains("--- killed: no event for 1 s"), "\(log)")
    }

    @Test func aStoppedChildIsKilledToo() async throws {
        // SIGSTOP: SIGTERM would wait for a SIGCONT; the watchdog's SIGKILL does not.
        let (outcome, _, _) = try await run(then: "kill -STOP $$")
        #expect(outcome.exitCode == 59)
    }

    @Test func aChildWhoseOutputAGrandchildHoldsEndsAtTheBackstop() async throws {
        // The child exits but leaves a grandchild holding its standard output: no end of file ever comes. The read's
        // own deadline (twice the stall limit) ends the wait; the attempt fails as a stall.
        let pidFile = try FlashFixture.temporaryDirectory().appendingPathComponent("grandchild.pid")
        defer {
            if let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                kill(pid, SIGKILL)
            }
        }
        let (outcome, stages, _) = try await run(then: "sleep 600 & echo $! > '\(pidFile.path)'; exit 0")
        #expect(stages == ["connecting"])
        #expect(outcome.exitCode == 59)
        #expect(outcome.retryable)
    }

    @Test func aChildThatClosesItsOutputButRunsOnIsKilledAfterTheGrace() async throws {
        // End of file, but no exit: a bounded wait (ProcessFlasher.exitGrace), then SIGKILL and reap.
        // A stall limit far above the grace: the kill is the grace's, not the watchdog's.
        let (outcome, stages, log) = try await run(then: "exec >&-; exec sleep 600", stallTimeout: 120)
        #expect(stages == ["connecting"])
        #expect(!outcome.success)
        #expect(outcome.exitCode == 59)
        #expect(outcome.error?.contains("closed its output but did not exit within 10 s and was killed") == true, "\(outcome)")
        #expect(log.contains("--- its output ended but it did not exit within"), "\(log)")
    }

    /// The watchdog on a manual clock: each sign of life moves the deadline; silence for the whole limit fires it.
    @Test func signsOfLifeMoveTheDeadline() async throws {
        let clock = ManualClock()
        let fired = Mutex(0)
        let watchdog = StallWatchdog(limit: .seconds(10), clock: clock) { fired.withLock { $0 += 1 } }
        for _ in 0..<5 {
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(6))
            watchdog.touch()  // 6 s of silence, then a line: never 10 s in a row
        }
        #expect(fired.withLock { $0 } == 0)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(10))
        var spins = 0
        while fired.withLock({ $0 }) == 0, spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
        #expect(fired.withLock { $0 } == 1)
        #expect(watchdog.stop())
        clock.advance(by: .seconds(60))
        #expect(fired.withLock { $0 } == 1)  // once
    }

    @Test func thePlanSetsTheLimitAndDefaultsToTwoMinutesOrMore() throws {
        var options = BatchPlan.FlashOptions()
        #expect(options.effectiveStallTimeout == 120)
        options.scanTimeout = 30
        options.timeout = 20
        #expect(options.effectiveStallTimeout == 210)  // 3 × (30 + 20) + 60
        options.stallTimeout = 5
        #expect(options.effectiveStallTimeout == 5)
    }
}

final class StageRecorder: Sendable {
    private let stages = Mutex<[String]>([])
    func add(_ stage: String) { stages.withLock { $0.append(stage) } }
    var all: [String] { stages.withLock { $0 } }
}
