import Foundation
import Testing

/// The completion scripts `bledfu --generate-completion-script` writes (tools/package installs them): bash completes
/// the values of --family and --mode and the adapters; zsh and fish carry the same lists and the file kinds.
@Suite(.timeLimit(.minutes(3))) struct CompletionScriptTests {
    /// What bash offers after `words` (the last one being completed), from the generated script, the way bash calls
    /// the function on Tab. The script's custom completions call the built `bledfu` (first on PATH).
    static func bashCompletes(_ words: [String]) async throws -> [String] {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-\(UUID().uuidString.prefix(8)).bash")
        defer { try? FileManager.default.removeItem(at: script) }
        let generated = try await CLIRunner.runTool(CLIRunner.binary.path, ["--generate-completion-script", "bash"])
        try Data(generated.utf8).write(to: script)
        let line = words.joined(separator: " ")
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let program = """
            source '\(script.path)'
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); COMP_LINE='\(line)'; COMP_POINT=${#COMP_LINE}
            _bledfu bledfu '\(words.last ?? "")' '\(words.dropLast().last ?? "")'
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let path = CLIRunner.binary.deletingLastPathComponent().path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let output = try await CLIRunner.runTool("/usr/bin/env", ["PATH=\(path)", "bash", "--norc", "--noprofile", "-c", program])
        return output.split(separator: "\n").map(String.init)
    }

    @Test func bashCompletesFamiliesModesAndAdapters() async throws {
        #expect(try await Self.bashCompletes(["bledfu", "flash", "--family", ""]).sorted() == ["auto", "legacy", "secure", "smp"])
        let modes = try await Self.bashCompletes(["bledfu", "flash", "--mode", ""])
        #expect(["adaptive", "prn:", "window:", "one-at-a-time", "stream"].allSatisfy(modes.contains), "\(modes)")
        #expect(try await Self.bashCompletes(["bledfu", "flash", "--mode", "seed"]) == ["seed-pacing"])
        let adapters = try await Self.bashCompletes(["bledfu", "scan", "--adapter", ""])
        #expect(adapters.contains("any") && adapters.contains("virtual:"), "\(adapters)")
    }

    @Test func zshAndFishScriptsCarryTheListsAndFileKinds() async throws {
        for shell in ["zsh", "fish"] {
            let script = try await CLIRunner.runTool(CLIRunner.binary.path, ["--generate-completion-script", shell])
            for word in ["legacy", "secure", "smp", "seed-pacing", "zip", "pem", "yaml", "dat"] {
                #expect(script.contains(word), "\(shell) script lacks \(word)")
            }
        }
    }
}
