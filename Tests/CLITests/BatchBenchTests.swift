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

    @Test func badOptionsAreRejected() {
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--devices", "0"]) }
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--profile", "toaster"]) }
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--speedup", "-1"]) }
    }
}
