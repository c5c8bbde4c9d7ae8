import BLECore
import Foundation

/// The live view's model: one line per active device and the totals. The CLI redraws it on a terminal, prints
/// the finished devices as plain lines otherwise, and with `--json` prints ``ndjson(for:at:)`` lines.
public struct LiveView: Sendable {
    /// One active device.
    public struct DeviceLine: Sendable, Equatable {
        public var address: String
        public var name: String?
        public var adapter: String
        public var attempt: Int
        public var progress: DeviceProgress

        /// "Bracelet-3 [C6:05:04:03:04:01] #1 uploading part 1/1 [#####-----] 52% 15232/29284 B on hci0": what a
        /// person looks for first comes first (a terminal narrower than the line cuts its end: the adapter, which
        /// may be a long virtual radio path).
        public var text: String {
            let label = (name.map { "\($0) " } ?? "") + "[\(address)]"
            var line = "\(label) #\(attempt) \(progress.stage)"
            if progress.total > 0, progress.stage == "uploading" {
                let bar = String(repeating: "#", count: progress.percent / 10) + String(repeating: "-", count: 10 - progress.percent / 10)
                line += " part \(progress.part)/\(progress.parts) [\(bar)] \(progress.percent)% \(progress.bytes)/\(progress.total) B"
            }
            return line + " on \(adapter)"
        }
    }

    /// The counters under the device lines.
    public struct Totals: Sendable, Equatable, Codable {
        public var done = 0
        public var skipped = 0
        public var failed = 0
        public var remaining = 0
        public var active = 0
        /// Devices finished (done, skipped or failed) in this run per hour of this run.
        public var ratePerHour = 0.0
        public var elapsedSeconds = 0.0

        public var text: String {
            let minutes = Int(elapsedSeconds) / 60
            let seconds = Int(elapsedSeconds) % 60
            return "done \(done)  skipped \(skipped)  failed \(failed)  remaining \(remaining)  active \(active)  "
                + String(format: "rate %.0f/h  elapsed %d:%02d", ratePerHour, minutes, seconds)
        }
    }

    public let startedAt: Date
    public private(set) var active: [DeviceLine] = []
    public private(set) var statuses: [String: DeviceStatus] = [:]
    /// Devices that reached a final status during this run.
    public private(set) var finishedThisRun = 0

    public init(startedAt: Date) { self.startedAt = startedAt }

    public mutating func apply(_ event: BatchEvent) {
        switch event {
        case .enrolled(let target, let status):
            statuses[target.address.description] = status == .running ? .pending : status
        case .started(let address, let name, let adapter, let attempt):
            active.removeAll { $0.address == address }
            active.append(DeviceLine(address: address, name: name, adapter: adapter, attempt: attempt, progress: DeviceProgress(stage: "starting")))
            statuses[address] = .running
        case .progress(let address, let progress):
            if let index = active.firstIndex(where: { $0.address == address }) { active[index].progress = progress }
        case .finished(let address, let status, _, _):
            active.removeAll { $0.address == address }
            if status.isFinal, statuses[address]?.isFinal != true { finishedThisRun += 1 }
            statuses[address] = status
        case .lineStopped, .message:
            break
        }
    }

    public func totals(at date: Date) -> Totals {
        var totals = Totals()
        for status in statuses.values {
            switch status {
            case .done: totals.done += 1
            case .skipped: totals.skipped += 1
            case .failed: totals.failed += 1
            case .pending, .running: totals.remaining += 1
            }
        }
        totals.active = active.count
        totals.elapsedSeconds = max(0, date.timeIntervalSince(startedAt))
        totals.ratePerHour = totals.elapsedSeconds > 0 ? Double(finishedThisRun) * 3600 / totals.elapsedSeconds : 0
        return totals
    }

    /// The terminal frame: one line per active device, then the totals.
    public func frame(at date: Date) -> [String] {
        active.map(\.text) + [totals(at: date).text]
    }

    /// The NDJSON line for an event (progress events only when the percentage or stage changed is the caller's
    /// choice), with the totals after each finished device.
    public func ndjson(for event: BatchEvent, at date: Date) -> [String] {
        var objects: [[String: any Sendable]] = []
        switch event {
        case .enrolled(let target, let status):
            var object: [String: any Sendable] = ["event": "device", "address": target.address.description, "class": target.className, "status": status.rawValue]
            if let name = target.name { object["name"] = name }
            objects.append(object)
        case .started(let address, let name, let adapter, let attempt):
            var object: [String: any Sendable] = ["event": "started", "address": address, "adapter": adapter, "attempt": attempt]
            if let name { object["name"] = name }
            objects.append(object)
        case .progress(let address, let progress):
            objects.append([
                "event": "progress", "address": address, "stage": progress.stage, "bytes": progress.bytes, "total": progress.total,
                "percent": progress.percent, "part": progress.part, "parts": progress.parts,
            ])
        case .finished(let address, let status, let error, let retrying):
            var object: [String: any Sendable] = ["event": "finished", "address": address, "status": status.rawValue, "retrying": retrying]
            if let error { object["error"] = error }
            objects.append(object)
            objects.append(totalsObject(at: date))
        case .lineStopped(let failures):
            objects.append(["event": "line-stopped", "failures": failures])
        case .message(let text):
            objects.append(["event": "message", "message": text])
        }
        let time = Self.timestamp(date)
        return objects.map { object in object.merging(["time": time]) { own, _ in own } }.compactMap(Self.encode)
    }

    /// RFC 3339 UTC with milliseconds (`2026-11-28T04:05:06.789Z`): the `time` of every NDJSON event bledfu writes
    /// (docs/events.md).
    public static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    public func totalsObject(at date: Date) -> [String: any Sendable] {
        let totals = totals(at: date)
        return [
            "event": "totals", "done": totals.done, "skipped": totals.skipped, "failed": totals.failed,
            "remaining": totals.remaining, "active": totals.active, "ratePerHour": (totals.ratePerHour * 10).rounded() / 10,
            "elapsedSeconds": (totals.elapsedSeconds * 1000).rounded() / 1000,
        ]
    }

    public static func encode(_ object: [String: any Sendable]) -> String? {
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
