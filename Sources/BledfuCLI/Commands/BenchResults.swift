import Batch
import Bench
import DFUPackage
import Foundation

/// The text table, the CSV and the JSON files.
enum BenchOutput {
    static func kB(_ bytesPerSecond: Double) -> String { String(format: "%.1f", bytesPerSecond / 1000) }
    static func percent(_ ratio: Double) -> String { ratio > 0 ? String(format: "%.0f%%", ratio * 100) : "n/a" }

    static func size(_ bytes: Int) -> String {
        bytes % 1024 == 0 ? "\(bytes / 1024)k" : "\(bytes)"
    }

    static func table(_ cells: [BenchCellSummary]) -> String {
        let header = [
            "mode", "profile", "size", "kB/s med", "min", "max", "ceiling", "%ceil", "%proto", "resent", "checkpts",
            "failed", "runs ok", "image ok",
        ]
        var rows: [[String]] = [header]
        for cell in cells {
            rows.append([
                cell.mode, cell.profile, size(cell.imageBytes), kB(cell.medianBytesPerSecond),
                kB(cell.minBytesPerSecond), kB(cell.maxBytesPerSecond),
                cell.ceilingBytesPerSecond > 0 ? kB(cell.ceilingBytesPerSecond) : "n/a", percent(cell.ceilingRatio),
                percent(cell.protocolBoundRatio), "\(cell.bytesResent)", "\(cell.checkpoints)",
                "\(cell.failedCheckpoints)", "\(cell.runs - cell.failedRuns)/\(cell.runs)",
                "\(cell.imagesCorrect)/\(cell.runs)",
            ])
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, field in
                let pad = String(repeating: " ", count: widths[index] - field.count)
                return index < 3 ? field + pad : pad + field
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// Writes results.csv and results.json into `directory` (created when missing).
    static func write(_ report: BenchReport, to directory: String) throws(CLIError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let csv = ([BenchRun.csvHeader] + report.runs.map(\.csvLine)).joined(separator: "\n") + "\n"
            try Data(csv.utf8).write(to: URL(fileURLWithPath: directory + "/results.csv"))
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
            try encoder.encode(report).write(to: URL(fileURLWithPath: directory + "/results.json"))
        } catch {
            throw CLIError(FileProblem.describe("write results to", directory, error), exitCode: BledfuExit.failure)
        }
    }
}
