import Batch
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

    @Test func helpListsEveryCodeOfTheRegistry() async throws {
        let help = try await normalizedHelp()
        func listed(_ code: Int32, _ meaning: String) -> Bool {
            help.contains(" \(code) " + meaning.split(whereSeparator: \.isWhitespace).joined(separator: " "))
        }
        for entry in ExitCodeRegistry.entries {
            #expect(listed(entry.code, entry.meaning), "bledfu --help lacks \(entry.code) \(entry.meaning)")
        }
        for code in Int32(50)...55 {
            #expect(help.contains(" \(code) "), "bledfu --help lacks \(code)")
        }
    }

    /// `batch run --help` and `flash --help` print their codes from the registry, worded as the registry words them.
    @Test func commandHelpComesFromTheRegistry() async throws {
        func normalized(_ text: String) -> String { text.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
        let batch = normalized(try await CLIRunner.run(["batch", "run", "--help"]).stdout)
        for (code, meaning) in BatchExit.table {
            let entry = ExitCodeRegistry.entries.first { $0.code == code }
            #expect(entry?.meaning == meaning)
            #expect(batch.contains(" \(code) " + normalized(meaning)), "batch run --help lacks \(code)")
        }
        let flash = normalized(try await CLIRunner.run(["flash", "--help"]).stdout)
        let reverted = try #require(ExitCodeRegistry.entries.first { $0.code == 47 })
        #expect(flash.contains(" 47 " + normalized(reverted.meaning)), "flash --help lacks 47")
        #expect(!flash.contains(" 50 "), "flash --help lists batch codes")
    }
}
