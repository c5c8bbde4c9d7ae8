import Foundation

/// The line at a glance, as `bledfu line status` prints it and the dashboard shows it: the stations (alive or not)
/// and their adapters, the devices by status, the devices in flight with their progress, the failures with their
/// causes, the yield and the devices per hour (over the last hour, and in buckets over time).
public struct LineSnapshot: Sendable, Equatable, Codable {
    public struct Station: Sendable, Equatable, Codable {
        public var name: String
        public var host: String
        public var batch: String
        /// `hci0×4, hci1×4`.
        public var adapters: String
        /// Its heartbeat is fresh and it has not stopped.
        public var alive: Bool
        public var state: String
        public var startedAt: String
        public var secondsSinceHeartbeat: Double
        public var inFlight: Int
        /// Devices whose final status this station wrote.
        public var finished: Int
    }

    public struct InFlight: Sendable, Equatable, Codable {
        public var address: String
        public var name: String?
        public var className: String
        public var station: String?
        public var adapter: String?
        public var stage: String?
        public var bytes: Int
        public var total: Int
        public var percent: Int
        public var attempt: Int
    }

    public struct Failure: Sendable, Equatable, Codable {
        public var address: String
        public var name: String?
        public var className: String
        public var station: String?
        public var error: String?
        public var exitCode: Int32?
        public var attempts: Int
    }

    /// A device that reached its final status (the newest first on the dashboard).
    public struct Finished: Sendable, Equatable, Codable {
        public var address: String
        public var name: String?
        public var className: String
        public var status: DeviceStatus
        public var station: String?
        public var adapter: String?
        public var attempts: Int
        public var finishedAt: String
    }

    /// Devices finished (done, skipped or failed) in one time bucket, as a rate.
    public struct Bucket: Sendable, Equatable, Codable {
        public var start: String
        public var finished: Int
        public var perHour: Double
    }

    public var batch: String?
    public var generatedAt: String
    public var done = 0
    public var skipped = 0
    public var failed = 0
    public var pending = 0
    public var running = 0
    /// (done + skipped) / (done + skipped + failed); nil before anything finished.
    public var yield: Double?
    /// Devices finished per hour, over the last hour (or since the first attempt, when that is more recent).
    public var devicesPerHour: Double = 0
    public var stations: [Station] = []
    public var inFlight: [InFlight] = []
    public var failures: [Failure] = []
    /// The last 50 devices that reached their final status, newest first.
    public var recent: [Finished] = []
    public var overTime: [Bucket] = []

    public var total: Int { done + skipped + failed + pending + running }

    public init(batch: String?, generatedAt: String) {
        self.batch = batch
        self.generatedAt = generatedAt
    }
}

extension BatchLog {
    /// The line (`batch`, nil: every batch of the database) as of `date`; `bucket` is the width of the rate buckets.
    public func snapshot(batch: String? = nil, at date: Date, bucket: Double = 300) async throws(BatchLogError) -> LineSnapshot {
        let records = try await devices(batch: batch)
        let (stationRows, firstStart) = try await read { s in
            let stations = try await s.rows(batch == nil ? "SELECT * FROM stations ORDER BY name" : "SELECT * FROM stations WHERE batch = ? ORDER BY name", batch.map { [.text($0)] } ?? [])
            let first = try await s.row(
                batch == nil ? "SELECT MIN(started_at) AS first FROM attempts" : "SELECT MIN(started_at) AS first FROM attempts WHERE batch = ?",
                batch.map { [.text($0)] } ?? [])?.string("first")
            return (stations, first)
        }
        var snapshot = LineSnapshot(batch: batch, generatedAt: Self.timestamp(date))
        let nowMS = Self.milliseconds(date)
        for record in records {
            switch record.status {
            case .done: snapshot.done += 1
            case .skipped: snapshot.skipped += 1
            case .failed: snapshot.failed += 1
            case .pending: snapshot.pending += 1
            case .running: snapshot.running += 1
            }
        }
        let finishedCount = snapshot.done + snapshot.skipped + snapshot.failed
        if finishedCount > 0 { snapshot.yield = Double(snapshot.done + snapshot.skipped) / Double(finishedCount) }
        snapshot.stations = stationRows.map { row in
            let name = row.string("name") ?? ""
            let heartbeat = row.int64("heartbeat_at") ?? 0
            return LineSnapshot.Station(
                name: name, host: row.string("host") ?? "", batch: row.string("batch") ?? "", adapters: row.string("adapters") ?? "",
                alive: Self.isAlive(row, at: nowMS) && row.string("state") == "running", state: row.string("state") ?? "",
                startedAt: row.string("started_at") ?? "", secondsSinceHeartbeat: max(0, Double(nowMS - heartbeat) / 1000),
                inFlight: records.filter { $0.status == .running && $0.station == name }.count,
                finished: records.filter { $0.status.isFinal && $0.station == name }.count)
        }
        snapshot.inFlight = records.filter { $0.status == .running }.map { record in
            let total = record.progressTotal
            return LineSnapshot.InFlight(
                address: record.address, name: record.name, className: record.className, station: record.station, adapter: record.adapter,
                stage: record.stage, bytes: record.progressBytes, total: total,
                percent: total > 0 ? min(100, record.progressBytes * 100 / total) : 0, attempt: record.attempts)
        }
        snapshot.failures = records.filter { $0.status == .failed }.map {
            LineSnapshot.Failure(
                address: $0.address, name: $0.name, className: $0.className, station: $0.station, error: $0.error, exitCode: $0.exitCode,
                attempts: $0.attempts)
        }
        snapshot.recent = records.filter(\.status.isFinal).sorted { ($0.finishedAt ?? "") > ($1.finishedAt ?? "") }.prefix(50).map {
            LineSnapshot.Finished(
                address: $0.address, name: $0.name, className: $0.className, status: $0.status, station: $0.station, adapter: $0.adapter,
                attempts: $0.attempts, finishedAt: $0.finishedAt ?? $0.updatedAt)
        }
        let finishedTimes = records.filter(\.status.isFinal).compactMap { $0.finishedAt.flatMap(Self.date(from:)) }.sorted()
        let window = min(3600, max(60, firstStart.flatMap(Self.date(from:)).map { date.timeIntervalSince($0) } ?? 3600))
        let recent = finishedTimes.filter { date.timeIntervalSince($0) <= window }.count
        snapshot.devicesPerHour = Double(recent) * 3600 / window
        if let first = finishedTimes.first {
            let start = (first.timeIntervalSince1970 / bucket).rounded(.down) * bucket
            var buckets: [Int: Int] = [:]
            for time in finishedTimes { buckets[Int((time.timeIntervalSince1970 - start) / bucket), default: 0] += 1 }
            let last = buckets.keys.max() ?? 0
            snapshot.overTime = (0...last).map { index in
                let count = buckets[index] ?? 0
                return LineSnapshot.Bucket(
                    start: Self.timestamp(Date(timeIntervalSince1970: start + Double(index) * bucket)), finished: count,
                    perHour: Double(count) * 3600 / bucket)
            }
        }
        return snapshot
    }

    static func date(from timestamp: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: timestamp)
    }
}
