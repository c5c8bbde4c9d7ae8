import Foundation

/// One transfer of one benchmark cell.
public struct BenchRun: Codable, Sendable {
    public var mode: String
    public var profile: String
    public var imageBytes: Int
    /// 1-based repetition.
    public var repetition: Int
    public var seconds: Double
    /// Image bytes per second over the whole part (init packet, objects, executes).
    public var bytesPerSecond: Double
    /// The link model's write-without-response ceiling, min(air, flash), at the negotiated MTU (0: unknown).
    public var ceilingBytesPerSecond: Double
    public var airBytesPerSecond: Double
    public var flashBytesPerSecond: Double
    /// The ceiling less the two request round trips every data object needs (Create, Execute).
    public var protocolBoundBytesPerSecond: Double
    public var mtu: Int
    public var bytesResent: Int
    /// Checkpoint answers received (PRNs and Calculate Checksum responses).
    public var checkpoints: Int
    public var checksumRequests: Int
    /// Failed checkpoints (shortfall, mismatch, timeout).
    public var failedCheckpoints: Int
    public var packetsDropped: Int
    public var completed: Bool
    public var imageCorrect: Bool
    public var error: String?

    /// A run that has not happened yet: every figure 0, not completed.
    public init(mode: String, profile: String, imageBytes: Int, repetition: Int, mtu: Int = 0) {
        self.mode = mode
        self.profile = profile
        self.imageBytes = imageBytes
        self.repetition = repetition
        self.seconds = 0
        self.bytesPerSecond = 0
        self.ceilingBytesPerSecond = 0
        self.airBytesPerSecond = 0
        self.flashBytesPerSecond = 0
        self.protocolBoundBytesPerSecond = 0
        self.mtu = mtu
        self.bytesResent = 0
        self.checkpoints = 0
        self.checksumRequests = 0
        self.failedCheckpoints = 0
        self.packetsDropped = 0
        self.completed = false
        self.imageCorrect = false
        self.error = nil
    }

    /// Records the transfer's time and outcome: throughput is the image bytes over `seconds`, 0 for a failed run.
    public mutating func finish(seconds: Double, completed: Bool) {
        self.seconds = seconds
        self.completed = completed
        bytesPerSecond = completed && seconds > 0 ? Double(imageBytes) / seconds : 0
    }

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

    public static let csvHeader =
        "mode,profile,image_bytes,repetition,seconds,bytes_per_second,ceiling_bytes_per_second,air_bytes_per_second,"
        + "flash_bytes_per_second,protocol_bound_bytes_per_second,mtu,bytes_resent,checkpoints,checksum_requests,"
        + "failed_checkpoints,packets_dropped,completed,image_correct,error"

    public var csvLine: String {
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

    public static func csvQuoted(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// The repetitions of one (mode, profile, size) cell, summarised.
public struct BenchCellSummary: Codable, Sendable {
    public var mode: String
    public var profile: String
    public var imageBytes: Int
    public var runs: Int
    public var medianBytesPerSecond: Double
    public var minBytesPerSecond: Double
    public var maxBytesPerSecond: Double
    public var ceilingBytesPerSecond: Double
    public var protocolBoundBytesPerSecond: Double
    /// Median throughput / ceiling (0 when the ceiling is unknown).
    public var ceilingRatio: Double
    public var protocolBoundRatio: Double
    public var bytesResent: Int
    public var checkpoints: Int
    public var failedCheckpoints: Int
    public var failedRuns: Int
    public var imagesCorrect: Int

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
    public static func summarise(_ runs: [BenchRun]) -> [BenchCellSummary] {
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
public struct BenchReport: Codable, Sendable {
    public var speedup: Double
    public var repetitions: Int
    public var startedAt: String
    public var runs: [BenchRun]
    public var cells: [BenchCellSummary]

    public init(speedup: Double, repetitions: Int, startedAt: String, runs: [BenchRun], cells: [BenchCellSummary]) {
        self.speedup = speedup
        self.repetitions = repetitions
        self.startedAt = startedAt
        self.runs = runs
        self.cells = cells
    }

    enum CodingKeys: String, CodingKey {
        case speedup, repetitions, runs, cells
        case startedAt = "started_at"
    }
}

