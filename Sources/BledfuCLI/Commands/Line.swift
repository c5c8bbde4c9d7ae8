import ArgumentParser

/// `bledfu line`: the line of stations that share one database (docs/batch.md, "A line of stations").
struct LineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "line",
        abstract: "Look at a line of stations: its status at a glance, or a live read-only dashboard.",
        discussion: """
            Examples:
              bledfu line status --db postgres://line@db-host/line
              bledfu line serve --db postgres://line@db-host/line --listen 127.0.0.1:8080
            """,
        subcommands: [LineStatus.self, LineServe.self])
}

/// Options the line commands share: the database and the line in it.
struct LineDatabaseOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The line's database: postgres://USER@HOST/DB, or an SQLite file (default STATE/batch.sqlite).", valueName: "url|file"))
    var db: String?
    @Option(name: .long, help: ArgumentHelp("Where the default SQLite database lives.", valueName: "dir"))
    var stateDir: String?
    @Option(name: .long, help: ArgumentHelp("Only this line (batch) of the database (default: every one).", valueName: "name"))
    var line: String?
}
