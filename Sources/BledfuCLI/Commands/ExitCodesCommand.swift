import ArgumentParser
import Batch

/// `bledfu exit-codes`: the exit-code registry as text or as the Markdown tables of README.md and
/// docs/exit-codes.md (`tools/check-exit-codes` compares them; `--write` there regenerates them).
struct ExitCodesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exit-codes", abstract: "Print bledfu's exit codes (the registry the docs are generated from).",
        shouldDisplay: false)

    @Flag(name: .long, help: "docs/exit-codes.md's table: code, name, meaning, the errors that end in it.")
    var markdown = false

    @Flag(name: .long, help: "README.md's table: code and meaning.")
    var readme = false

    @Flag(name: .long, help: "docs/batch.md's table: the codes `batch` ends with.")
    var batch = false

    @Flag(name: .long, help: "docs/packages.md's table: the package codes.")
    var package = false

    func run() {
        if markdown {
            print(ExitCodeRegistry.docsTable)
        } else if readme {
            print(ExitCodeRegistry.readmeTable)
        } else if batch {
            print(ExitCodeRegistry.batchTable)
        } else if package {
            print(ExitCodeRegistry.packageTable)
        } else {
            print(BledfuExit.helpText)
        }
    }
}
