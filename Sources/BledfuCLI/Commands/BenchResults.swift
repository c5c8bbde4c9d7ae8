import DFUSimulator
import Foundation

/// One transfer of one benchmark cell.
struct BenchRun: Codable, Sendable {
    var mode: String
    var profile: String
    var imageBytes: Int
    /// 1-based repetition.
    var repetition: Int
    var seconds: Double
    /// Image bytes per second over the whole part (init packet, objects, executes).
    var bytesPerSecond: Double
    /// The link model's write-without-response ceiling, min(air, flash), at the negotiated MTU (0: unknown).
    var ceilingBytesPerSecond: Double
    var airBytesPerSecond: Double
    var flashBytesPerSecond: Double
    /// The ceiling less the two request round trips every data object needs (Create, Execute).
    var protocolBoundBytesPerSecond: Double
    var mtu: Int
    var bytesResent: Int
    /// Checkpoint answers received (PRNs and Calculate Checksum responses).
    var checkpoints: Int
    var checksumRequests: Int
    /// Failed checkpoints (shortfall, mismatch, timeout).
    var failedCheckpoints: Int
    var packetsDropped: Int
    var completed: Bool
    var imageCorrect: Bool
    var error: String?

    enum CodingKeys: String, CodingKey {
        case mode, profile, repetition, seconds, mtu, checkpoints, completed, error
        case imageBytes = "image_bytes"
        case bytesPerSecond = "bytes_per_second"
        case ceilingBytesPerSecond = "ceiling_bytes_per_second"
        case airBytesPerSecond = "air_bytes_per_second"
        case flashBytesPerSecond = "flash_bytes_per_second"
        case protocolBoundBytesPerSecond = "protocol_bound_bytes_per_second"
        case bytesResent = "bytes_resent"
        case checksumRequests = "checksum_requests"
        case failedCheckpoints = "failed_checkpoints"
        case packetsDropped = "packets_dropped"
        case imageCorrect = "image_correct"
    }

    static let csvHeader =
        "mode,profile,image_bytes,repetition,seconds,bytes_per_second,ceiling_bytes_per_second,air_bytes_per_second,"
        + "flash_bytes_per_second,protocol_bound_bytes_per_second,mtu,bytes_resent,checkpoints,checksum_requests,"
        + "failed_checkpoints,packets_dropped,completed,image_correct,error"

    var csvLine: String {
        let fields: [String] = [
            mode, profile, "\(imageBytes)", "\(repetition)", String(format: "%.4f", seconds),
            String(format: "%.1f", bytesPerSecond), String(format: "%.1f", ceilingBytesPerSecond),
            String(format: "%.1f", airBytesPerSecond), String(format: "%.1f", flashBytesPerSecond),
            String(format: "%.1f", protocolBoundBytesPerSecond), "\(mtu)", "\(bytesResent)", "\(checkpoints)",
            "\(checksumRequests)", "\(failedCheckpoints)", "\(packetsDropped)", "\(completed)", "\(imageCorrect)",
            Self.csvQuoted(error ?? ""),
        ]
        return fields.joined(separator: ",")
    }

    static func csvQuoted(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// The repetitions of one (mode, profile, size) cell, summarised.
struct BenchCellSummary: Codable, Sendable {
    var mode: String
    var profile: String
    var imageBytes: Int
    var runs: Int
    var medianBytesPerSecond: Double
    var minBytesPerSecond: Double
    var maxBytesPerSecond: Double
    var ceilingBytesPerSecond: Double
    var protocolBoundBytesPerSecond: Double
    /// Median throughput / ceiling (0 when the ceiling is unknown).
    var ceilingRatio: Double
    var protocolBoundRatio: Double
    var bytesResent: Int
    var checkpoints: Int
    var failedCheckpoints: Int
    var failedRuns: Int
    var imagesCorrect: Int

    enum CodingKeys: String, CodingKey {
        case mode, profile, runs, checkpoints
        case imageBytes = "image_bytes"
        case medianBytesPerSecond = "median_bytes_per_second"
        case minBytesPerSecond = "min_bytes_per_second"
        case maxBytesPerSecond = "max_bytes_per_second"
        case ceilingBytesPerSecond = "ceiling_bytes_per_second"
        case protocolBoundBytesPerSecond = "protocol_bound_bytes_per_second"
        case ceilingRatio = "ceiling_ratio"
        case protocolBoundRatio = "protocol_bound_ratio"
        case bytesResent = "bytes_resent"
        case failedCheckpoints = "failed_checkpoints"
        case failedRuns = "failed_runs"
        case imagesCorrect = "images_correct"
    }

    /// Summaries in the order the cells first appear in `runs`. A failed run counts with 0 B/s.
    static func summarise(_ runs: [BenchRun]) -> [BenchCellSummary] {
        var order: [String] = []
        var groups: [String: [BenchRun]] = [:]
        for run in runs {
            let key = "\(run.mode)|\(run.profile)|\(run.imageBytes)"
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(run)
        }
        return order.compactMap { key in
            guard let group = groups[key], let first = group.first else { return nil }
            let speeds = group.map { $0.completed ? $0.bytesPerSecond : 0 }.sorted()
            let median = speeds.count % 2 == 1
                ? speeds[speeds.count / 2] : (speeds[speeds.count / 2 - 1] + speeds[speeds.count / 2]) / 2
            func medianInt(_ values: [Int]) -> Int { values.sorted()[values.count / 2] }
            let ceiling = first.ceilingBytesPerSecond
            let bound = first.protocolBoundBytesPerSecond
            return BenchCellSummary(
                mode: first.mode, profile: first.profile, imageBytes: first.imageBytes, runs: group.count,
                medianBytesPerSecond: median, minBytesPerSecond: speeds.first ?? 0,
                maxBytesPerSecond: speeds.last ?? 0, ceilingBytesPerSecond: ceiling,
                protocolBoundBytesPerSecond: bound, ceilingRatio: ceiling > 0 ? median / ceiling : 0,
                protocolBoundRatio: bound > 0 ? median / bound : 0,
                bytesResent: medianInt(group.map(\.bytesResent)), checkpoints: medianInt(group.map(\.checkpoints)),
                failedCheckpoints: group.map(\.failedCheckpoints).reduce(0, +),
                failedRuns: group.filter { !$0.completed }.count,
                imagesCorrect: group.filter(\.imageCorrect).count)
        }
    }
}

/// Everything one `bledfu bench` run produced (`results.json`).
struct BenchReport: Codable, Sendable {
    var speedup: Double
    var repetitions: Int
    var startedAt: String
    var runs: [BenchRun]
    var cells: [BenchCellSummary]

    enum CodingKeys: String, CodingKey {
        case speedup, repetitions, runs, cells
        case startedAt = "started_at"
    }
}

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
            throw CLIError("cannot write results to \(directory): \(error.localizedDescription)", exitCode: BledfuExit.failure)
        }
    }
}
