import ArgumentParser
import Bench
import Foundation
import Testing

@testable import BledfuCLI

/// `bledfu bench batch`, run in-process (its children are the built binary).
@Suite(.serialized, .timeLimit(.minutes(5))) struct BatchBenchTests {
    /// 16 bracelets in parallel against one alone; every device must end up done (else it throws). The ratio is
    /// printed (the goal, at most 1.3x, depends on the machine's load; `--max-ratio` enforces it where wanted).
    @Test(.timeLimit(.minutes(3))) func sixteenParallelAgainstOne() async throws {
        setenv("BLEDFU_FIRMWARE_DIR", CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path, 1)
        let bench = try BenchBatch.parse(["--devices", "16", "--speedup", "4", "--bledfu", CLIRunner.binary.path])
        let result = try await bench.measureBoth()
        print(String(format: "bench batch: 1 device %.2f s, 16 devices %.2f s, ratio %.2f", result.single, result.parallel, result.ratio))
        #expect(result.single > 0)
        #expect(result.parallel > 0)
        #expect(result.ratio == result.parallel / result.single)
        // Sixteen devices in parallel must beat sixteen one after another by far.
        #expect(result.ratio < 8, "16 devices took \(result.ratio)x one device")
    }

    /// `--max-ratio` below any ratio a run can reach (parallel is never faster than one device alone): the command
    /// measures, prints its line, and ends with one error line and exit 55 (`bench-goal-missed`).
    @Test(.timeLimit(.minutes(3))) func aMissedGoalIsExit55() async throws {
        let result = try await CLIRunner.run(
            ["bench", "batch", "--profile", "sensor", "--devices", "2", "--speedup", "8", "--max-ratio", "0.5"],
            environment: ["BLEDFU_FIRMWARE_DIR": CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path], timeout: 150)
        #expect(result.status == 55, "\(result.stderr)")
        #expect(result.stdout.contains("2 devices in parallel"), "\(result.stdout)")
        let errors = result.stderr.split(separator: "\n").filter { $0.hasPrefix("bledfu: error:") }
        #expect(errors.count == 1 && errors.first?.contains("exceeds --max-ratio 0.50") == true, "\(result.stderr)")
    }

    @Test func badOptionsAreRejected() {
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--devices", "0"]) }
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--profile", "toaster"]) }
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--speedup", "-1"]) }
    }
}
