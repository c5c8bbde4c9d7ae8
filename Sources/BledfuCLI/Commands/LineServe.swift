import ArgumentParser
import Batch
import Foundation
import LineDashboard

/// `bledfu line serve`: the read-only live dashboard (docs/batch.md, "The dashboard").
struct LineServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a read-only live dashboard of the line (stations, in flight, yield, failures, devices per hour).",
        discussion: """
            Binds to loopback unless --listen names another address. The page shows the database without its \
            password, and every string a device sent as text.

            \(BatchExit.helpText)
            """)

    @OptionGroup var options: LineDatabaseOptions
    @Option(name: .long, help: ArgumentHelp("HOST:PORT to listen on (port 0: any free port, printed).", valueName: "host:port"))
    var listen: String = "127.0.0.1:8080"
    @Option(name: .long, help: ArgumentHelp("Seconds between looks at the database for changes.", valueName: "seconds"))
    var refresh: Double = 1

    /// `HOST:PORT` (`[::1]:8080` for IPv6).
    static func parseListen(_ text: String) throws(CLIError) -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw CLIError("--listen \(text): expected HOST:PORT", exitCode: BledfuExit.usage)
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw CLIError("--listen \(text): no host", exitCode: BledfuExit.usage) }
        return (host, port)
    }

    func run() async throws {
        let (host, port) = try Self.parseListen(listen)
        guard refresh >= 0.1, refresh <= 60 else { throw CLIError("--refresh must be 0.1 to 60 seconds", exitCode: BledfuExit.usage) }
        let log = try await LineStatus.open(options)
        let line = options.line
        var dashboard = LineDashboard(database: log.path) { try await log.snapshot(batch: line, at: Date()) }
        dashboard.refresh = .milliseconds(Int64(refresh * 1000))
        do {
            try await dashboard.serve(host: host, port: port) { bound in
                let shown = host.contains(":") ? "[\(host)]" : host
                Console.errorRaw("bledfu line serve: http://\(shown):\(bound)/ (read-only; Ctrl-C stops)")
            }
        } catch {
            await log.close()
            throw CLIError("cannot serve on \(listen): \(error)", exitCode: BledfuExit.failure)
        }
        await log.close()
    }
}
