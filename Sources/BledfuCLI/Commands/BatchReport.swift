import BledfuKit
import ArgumentParser
import Batch
import Foundation
import LineStore

/// `bledfu batch report`: exports the batch database (SQLite, or a line's PostgreSQL store) as CSV, JSON or JUnit XML.
struct BatchReport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Export the batch log: one record per device (CSV, JSON with every attempt, or JUnit XML), for the line or one station.")

    @Option(name: .long, help: ArgumentHelp("The batch log: an SQLite file (default STATE/batch.sqlite) or a line's postgres:// URL.", valueName: "file|url"))
    var db: String?
    @Option(name: .long, help: ArgumentHelp("Where journals and the default database live.", valueName: "dir"))
    var stateDir: String?
    @Option(name: .long, help: "csv, json or junit.") var format: ExportFormat = .csv
    @Option(name: .long, help: ArgumentHelp("Only this plan's batch (the plan path as given to bledfu batch).", valueName: "plan"))
    var plan: String?
    @Option(name: .long, help: ArgumentHelp("Only this line's batch in a shared database (bledfu batch --line).", valueName: "name"))
    var line: String?
    @Option(name: .long, help: ArgumentHelp("Only the devices this station finished (or holds) and its attempts.", valueName: "name"))
    var station: String?
    @Option(name: .long, help: ArgumentHelp("Write here instead of standard output.", valueName: "file"))
    var output: String?

    enum ExportFormat: String, ExpressibleByArgument, CaseIterable {
        case csv, json, junit
        var library: BatchExport.Format { BatchExport.Format(rawValue: rawValue) ?? .csv }
    }

    func run() async throws {
        let state = ConfigDefaults.currentOrNone.stateDirectory(option: stateDir)
        let database = db ?? state.appendingPathComponent("batch.sqlite").path
        let batch = line ?? plan.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        let text: String
        let log: BatchLog
        do {
            log = try await BatchLog.open(location: database, mustExist: true)
        } catch {
            throw CLIError(error)
        }
        do {
            let records = try await log.devices(batch: batch, station: station)
            let attempts = try await log.attempts(batch: batch, station: station)
            await log.close()
            text = BatchExport.render(records, attempts: attempts, as: format.library)
        } catch {
            await log.close()
            throw CLIError(error)
        }
        if let output {
            do {
                try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                throw CLIError("cannot write \(output): \(error)", exitCode: BledfuExit.failure)
            }
        } else {
            FileHandle.standardOutput.write(Data(text.utf8))
        }
    }
}
