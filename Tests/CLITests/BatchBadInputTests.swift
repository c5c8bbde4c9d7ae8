import Foundation
import LinuxIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Bad input to `bledfu batch` gets one clear line and a documented exit code (issue 21): `connections` above what the
/// adapter's controller carries (51), an adapter that disappears mid-batch (60).
@Suite("Batch bad input: connections above the controller, an adapter pulled", .serialized, .timeLimit(.minutes(8)))
struct BatchBadInputTests {
    @Test("connections above a virtual adapter's controller (5 links): refused before anything connects, exit 51")
    func connectionsAboveTheControllerAreRefused() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        let plan = try line.writePlan(expect: 1, connections: 8)
        let result = try await CLIRunner.run(["batch", plan, "--check"] + line.batchArguments)
        #expect(result.status == 51, "\(result.stderr)")
        #expect(
            result.errorLines == [
                "bledfu: error: plan \(plan): line 2: adapter virtual:\(line.radio.path): connections 8 is more than its controller "
                    + "carries (5 links): give at most 5, or connections: auto"
            ], "\(result.stderr)")
    }

    @Test("The adapter disappears mid-batch (the virtual radio's directory removed): exit 60, the devices stay pending")
    func anAdapterPulledMidBatch() async throws {
        let line = try BatchLine()
        defer { line.cleanUp() }
        try line.simulate(["bracelet:2"], ["--fault", "slow-flash=12"], speedup: 1)
        try await line.waitForDevices(2)
        let plan = try line.writePlan(expect: 2, connections: 2, retries: 3)
        let errors = line.directory.appendingPathComponent("batch.err").path
        let errorsFD = try FileIO.create(errors)
        let batch = try BatchInterruptTests.RunningBatch(["batch", plan, "--json"] + line.batchArguments, standardError: .descriptor(errorsFD))
        try FileIO.close(errorsFD)
        // Pulled while both upload (decided and done off the pool, so a loaded test process does not lag behind):
        // the radio's directory (the controller, the advertisements, the sockets' names) goes away, and with it every
        // link (as the kernel drops an unplugged adapter's links: the other end's process ends here).
        let radio = line.radio
        let simulators = line.simulators.map(\.process.child)
        let pulled = await batch.when({ lines in
            Set(
                BatchInterruptTests.RunningBatch.events("progress", in: lines).filter { ($0["bytes"] as? Int ?? 0) > 0 }
                    .compactMap { $0["address"] as? String }
            ).count == 2
        }) {
            try? FileManager.default.removeItem(at: radio)
            for simulator in simulators { simulator.signal(SIGKILL) }
        }
        #expect(pulled, "\(batch.lines.suffix(5))")
        #expect(await batch.waitForEnd(timeout: 240))
        #expect(await batch.child.wait(timeout: .seconds(60)) == .exited(60))
        let text = String(decoding: try FileIO.read(errors), as: UTF8.self)
        let last = text.split(separator: "\n").last.map(String.init)
        #expect(
            last
                == "bledfu: error: adapter virtual:\(line.radio.path) gone (unplugged or removed); 2 device(s) pending: plug it back "
                + "in and run the same command again (their journals resume them)", "\(text)")
        #expect(batch.lines.contains { $0.contains("is gone (unplugged or removed): no device starts on it again in this run") })
        let report = try await line.report()
        #expect(report.count == 2)
        for (address, entry) in report {
            #expect(entry.record["status"] as? String == "pending", "\(address): \(entry.record)")
            #expect(entry.attempts.count == 1, "a gone adapter is not retried: \(entry.attempts)")
        }
    }
}
