import ArgumentParser

/// `bledfu bench`: throughput benchmarks (docs/benchmarks.md). The default subcommand compares write modes.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure DFU throughput: write modes x link profiles x image sizes, against the link's ceiling.",
        discussion: """
            Examples:
              bledfu bench --repeat 3 --out bench-results
              bledfu bench --modes adaptive,ios --profiles bracelet --sizes 64k --speedup 10
              bledfu bench --unthrottled --sizes 4m
              bledfu bench --device C6:05:04:03:02:01 --package app.zip --adapter hci0
            `bledfu bench` alone runs `bledfu bench modes`; `bledfu bench batch` benchmarks parallel updates.
            """,
        subcommands: [BenchModes.self, BenchBatch.self],
        defaultSubcommand: BenchModes.self
    )
}
