import Foundation
import Testing

@testable import BledfuCLI

/// `bledfu --help` lists every exit code: the general table and the batch codes (50-59) from `BatchExit`.
@Suite(.timeLimit(.minutes(5))) struct HelpExitCodeTests {
    /// `bledfu --help` with every run of whitespace (tabs, the line breaks of wrapped text) made one space.
    func normalizedHelp() async throws -> String {
        let result = try await CLIRunner.run(["--help"])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    @Test func helpListsEveryCodeOfBothTables() async throws {
        let help = try await normalizedHelp()
        func listed(_ code: Int32, _ meaning: String) -> Bool {
            help.contains(" \(code) " + meaning.split(whereSeparator: \.isWhitespace).joined(separator: " "))
        }
        for (code, meaning) in BledfuExit.table {
            #expect(listed(code, meaning), "bledfu --help lacks \(code) \(meaning)")
        }
        // Every batch code, including the one only `bench batch` uses, with BatchExit's own wording.
        for (code, meaning) in BatchExit.table where (50...59).contains(code) {
            #expect(listed(code, "batch: " + meaning), "bledfu --help lacks batch exit code \(code)")
        }
        #expect(help.contains(" \(BatchExit.benchGoalMissed) bench batch: "))
        for code in Int32(50)...55 {
            #expect(help.contains(" \(code) "), "bledfu --help lacks \(code)")
        }
    }

    @Test func batchCodesComeFromBatchExitOnce() {
        let numbers = BledfuExit.table.map(\.0)
        #expect(numbers.count == Set(numbers).count, "a code is listed twice: \(numbers)")
        #expect(numbers == numbers.sorted(), "codes out of order: \(numbers)")
        for (code, meaning) in BatchExit.table where (50...59).contains(code) {
            #expect(BledfuExit.table.contains { $0.0 == code && $0.1.hasSuffix(meaning) })
        }
        #expect(BledfuExit.table.contains { $0.0 == BatchExit.benchGoalMissed && $0.1.hasPrefix("bench batch") })
    }
}
