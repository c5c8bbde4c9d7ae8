import Foundation
import SecureDFU
import PlatformIO

/// Counters for the final summary.
struct FlashStatistics: Sendable {
    var started = ContinuousClock.now
    /// Image bytes confirmed by the device in this run (resumed bytes excluded).
    var bytesSent = 0
    var bytesResent = 0
    var checkpoints = 0
    var reconnects = 0
    var retries = 0
    var partsSkipped = 0

    var seconds: Double {
        let elapsed = started.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    var averageBytesPerSecond: Double { seconds > 0 ? Double(bytesSent) / seconds : 0 }
}

/// How `bledfu flash` shows what it does: a live bar on a terminal, plain lines about every 10 % otherwise, NDJSON
/// events with `--json` (`{"event":"state"|"progress"|"warning"|"message"|"result", …}`).
final class FlashProgress: @unchecked Sendable {
    enum Style { case terminal, plain, json }

    let style: Style
    private let lock = NSLock()
    private var lastPercent = -1
    private var lastObject = -1
    private var lastBarUpdate = ContinuousClock.now.advanced(by: .seconds(-10))
    private var samples: [(time: ContinuousClock.Instant, bytes: Int)] = []
    private var barShown = false
    /// Confirmed bytes of the current run at its first report (a resume starts part-way).
    private var runStart: (part: Int, bytes: Int)?
    private(set) var statistics = FlashStatistics()
    private var runConfirmed = 0
    private var runResent = 0

    init(json: Bool) {
        style = json ? .json : (system_isatty(1) != 0 ? .terminal : .plain)
    }

    private func emit(_ object: [String: any Sendable]) { Console.json(object) }

    private func line(_ text: String) {
        if barShown {
            FileHandle.standardOutput.write(Data("\r\u{1B}[K".utf8))
            barShown = false
        }
        Self.out(text + "\n")
    }

    func state(_ state: String, _ fields: [String: any Sendable] = [:]) {
        lock.withLock {
            if style == .json {
                emit(fields.merging(["event": "state", "state": state]) { a, _ in a })
            } else {
                let details = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                line(details.isEmpty ? state : "\(state): \(details)")
            }
        }
    }

    func message(_ text: String) {
        lock.withLock {
            if style == .json { emit(["event": "message", "message": text]) } else { line(text) }
        }
    }

    func warning(_ text: String) {
        lock.withLock {
            if style == .json {
                emit(["event": "warning", "message": text])
            } else {
                if barShown { line("") }
                Console.warning(text)
            }
        }
    }

    func count(checkpoint: Bool = false, reconnect: Bool = false, skipped: Bool = false) {
        lock.withLock {
            if checkpoint { statistics.checkpoints += 1 }
            if reconnect { statistics.reconnects += 1 }
            if skipped { statistics.partsSkipped += 1 }
        }
    }

    /// Opens the counters of one engine run: `baseBytes` were confirmed before it (a resume).
    func beginRun(part: Int, baseBytes: Int) {
        lock.withLock { runStart = (part, baseBytes) }
    }

    /// Closes the counters of one engine run (one connection).
    func endRun() {
        lock.withLock {
            statistics.bytesSent += runConfirmed
            statistics.bytesResent += runResent
            runConfirmed = 0
            runResent = 0
            runStart = nil
            samples = []
            lastPercent = -1
            lastObject = -1
        }
    }

    func report(_ report: DFUProgressReport) {
        lock.withLock {
            let p = report.progress
            if runStart == nil { runStart = (report.partIndex, p.bytesConfirmed) }
            runConfirmed = max(0, p.bytesConfirmed - (runStart?.bytes ?? 0))
            runResent = p.bytesResent
            let now = ContinuousClock.now
            samples.append((now, p.bytesConfirmed))
            samples.removeAll { $0.time.duration(to: now) > .seconds(3) }
            var current = report.bytesPerSecond
            if let first = samples.first, first.time < now {
                let elapsed = first.time.duration(to: now)
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                if seconds > 0.2 { current = Double(p.bytesConfirmed - first.bytes) / seconds }
            }
            let remaining = p.totalBytes - p.bytesConfirmed
            let eta = current > 0 ? Int(Double(remaining) / current) : nil
            switch style {
            case .json:
                guard p.percent != lastPercent || p.objectIndex != lastObject else { return }
                var event: [String: any Sendable] = [
                    "event": "progress", "part": report.partIndex + 1, "parts": report.partCount,
                    "object": p.objectIndex + 1, "objects": p.objectCount, "bytes": p.bytesConfirmed,
                    "total": p.totalBytes, "percent": p.percent, "bytesPerSecond": Int(current),
                    "averageBytesPerSecond": Int(report.bytesPerSecond), "retries": p.retries, "bytesResent": p.bytesResent,
                ]
                if let eta { event["etaSeconds"] = eta }
                emit(event)
            case .plain:
                guard p.percent / 10 != lastPercent / 10 || lastPercent < 0 else { return }
                Self.out(
                    "part \(report.partIndex + 1)/\(report.partCount): \(p.percent)% (\(p.bytesConfirmed)/\(p.totalBytes) bytes, "
                        + "\(Self.kB(current)) kB/s)\n")
            case .terminal:
                guard lastBarUpdate.duration(to: now) > .milliseconds(100) || p.bytesConfirmed == p.totalBytes else { return }
                lastBarUpdate = now
                let width = 24
                let filled = p.totalBytes > 0 ? width * p.bytesConfirmed / p.totalBytes : width
                let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: max(0, width - filled))
                let etaText = eta.map { "\($0 / 60):" + String(format: "%02d", $0 % 60) } ?? "--:--"
                let text = "part \(report.partIndex + 1)/\(report.partCount) [\(bar)] \(p.percent)% obj \(p.objectIndex + 1)/\(p.objectCount) "
                    + "\(p.bytesConfirmed)/\(p.totalBytes) B \(Self.kB(current)) kB/s (avg \(Self.kB(report.bytesPerSecond))) "
                    + "ETA \(etaText) retries \(p.retries)"
                FileHandle.standardOutput.write(Data(("\r\u{1B}[K" + text).utf8))
                barShown = true
            }
            lastPercent = p.percent
            lastObject = p.objectIndex
        }
    }

    static func out(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }

    static func kB(_ bytesPerSecond: Double) -> String { String(format: "%.1f", bytesPerSecond / 1000) }

    /// The final summary and, with `--json`, the result event.
    func finish(exitCode: Int32, message: String?) {
        lock.withLock {
            let s = statistics
            if style == .json {
                var event: [String: any Sendable] = [
                    "event": "result", "success": exitCode == 0, "exitCode": Int(exitCode),
                    "seconds": (s.seconds * 1000).rounded() / 1000, "bytesSent": s.bytesSent, "bytesResent": s.bytesResent,
                    "averageBytesPerSecond": Int(s.averageBytesPerSecond), "checkpoints": s.checkpoints,
                    "reconnects": s.reconnects, "partsSkipped": s.partsSkipped,
                ]
                if let message { event["message"] = message }
                emit(event)
            } else {
                let seconds = String(format: "%.1f", s.seconds)
                line(
                    "\(exitCode == 0 ? "done" : "stopped") in \(seconds) s: \(s.bytesSent) bytes sent at "
                        + "\(Self.kB(s.averageBytesPerSecond)) kB/s average, \(s.bytesResent) resent, "
                        + "\(s.checkpoints) checkpoint(s), \(s.reconnects) reconnect(s)")
            }
        }
    }
}
