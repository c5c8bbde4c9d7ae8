import ArgumentParser

/// `bledfu batch`: the production line (docs/batch.md). `bledfu batch PLAN` runs a plan; `bledfu batch report`
/// exports the database.
struct BatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Update many devices in parallel from a YAML plan, with a crash-safe SQLite log and reports.",
        discussion: """
            Examples:
              bledfu batch Firmware/plans/line.yaml
              bledfu batch line.yaml --json --db line.sqlite
              bledfu batch report --db line.sqlite --format junit --output line.xml
            """,
        subcommands: [BatchRun.self, BatchReport.self],
        defaultSubcommand: BatchRun.self)
}
