import BledfuKit
import ArgumentParser
import Fleet
import Foundation

/// `bledfu batch report`: exports the batch database as CSV, JSON or JUnit XML.
struct BatchReport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Export the batch log: one record per device (CSV, JSON with every attempt, or JUnit XML).")

    @Option(name: .long, help: ArgumentHelp("The SQLite log (default STATE/batch.sqlite).", valueName: "file"))
    var db: String?
    @Option(name: .long, help: ArgumentHelp("Where journals and the default database live.", valueName: "dir"))
    var stateDir: String?
    @Option(name: .long, help: "csv, json or junit.") var format: ExportFormat = .csv
    @Option(name: .long, help: ArgumentHelp("Only this plan's batch (the plan path as given to bledfu batch).", valueName: "plan"))
    var plan: String?
    @Option(name: .long, help: ArgumentHelp("Write here instead of standard output.", valueName: "file"))
    var output: String?

    enum ExportFormat: String, ExpressibleByArgument, CaseIterable {
        case csv, json, junit
        var fleet: BatchExport.Format { BatchExport.Format(rawValue: rawValue) ?? .csv }
    }

    func run() throws {
        let state = stateDir.map { URL(fileURLWithPath: $0) } ?? JournalFileStore.defaultDirectory()
        let database = db ?? state.appendingPathComponent("batch.sqlite").path
        guard FileManager.default.fileExists(atPath: database) else {
            throw CLIError("no batch database at \(database)", exitCode: BatchExit.databaseError)
        }
        let batch = plan.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        let text: String
        do {
            let log = try BatchLog(path: database)
            text = BatchExport.render(try log.devices(batch: batch), attempts: try log.attempts(batch: batch), as: format.fleet)
        } catch {
            throw CLIError(error.reason, exitCode: BatchExit.databaseError)
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
