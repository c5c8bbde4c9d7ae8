import Batch
import Foundation
import LinuxIO

/// Shows a running line: on a terminal a frame redrawn in place (one line per active device and the totals), on a
/// pipe one line per finished device and the totals, with `--json` NDJSON events (docs/batch.md, "Live view").
final class BatchConsole: @unchecked Sendable {
    // @unchecked: every mutable field is only touched under `lock`.
    enum Style { case terminal, plain, json }

    let style: Style
    private let lock = NSLock()
    private var view: LiveView
    private var drawnLines = 0
    private var lastDraw = Date.distantPast
    /// Last percent and stage sent per device (--json sends a progress event only when one changed).
    private var lastProgress: [String: (Int, String)] = [:]

    init(json: Bool, startedAt: Date = Date()) {
        style = json ? .json : (system_isatty(1) != 0 ? .terminal : .plain)
        view = LiveView(startedAt: startedAt)
    }

    func handle(_ event: BatchEvent) {
        lock.withLock {
            view.apply(event)
            let now = Date()
            switch style {
            case .json:
                if case .progress(let address, let progress) = event {
                    let key = (progress.percent, progress.stage)
                    if let last = lastProgress[address], last == key { return }
                    lastProgress[address] = key
                }
                for line in view.ndjson(for: event, at: now) { write(line + "\n") }
            case .plain:
                switch event {
                case .started(let address, let name, let adapter, let attempt):
                    write("start \(address)\(name.map { " \($0)" } ?? "") on \(adapter) (attempt \(attempt))\n")
                case .finished(let address, let status, let error, let retrying):
                    let cause = error.map { ": \($0)" } ?? ""
                    write("\(status.rawValue) \(address)\(retrying ? " (will retry)" : "")\(cause)\n")
                    write(view.totals(at: now).text + "\n")
                case .lineStopped(let failures):
                    write("line stopped after \(failures) failed device(s)\n")
                case .message(let text):
                    write(text + "\n")
                default: break
                }
            case .terminal:
                var permanent: String?
                if case .finished(let address, let status, let error, let retrying) = event {
                    permanent = "\(status.rawValue) \(address)\(retrying ? " (will retry)" : "")" + (error.map { ": \($0)" } ?? "")
                }
                if case .lineStopped(let failures) = event { permanent = "line stopped after \(failures) failed device(s)" }
                if case .message(let text) = event { permanent = text }
                guard permanent != nil || now.timeIntervalSince(lastDraw) > 0.2 else { return }
                redraw(now: now, permanent: permanent)
            }
        }
    }

    /// Clears the old frame, prints `permanent` above it (it scrolls away), and draws the frame again.
    private func redraw(now: Date, permanent: String?) {
        var text = ""
        if drawnLines > 0 { text += "\u{1B}[\(drawnLines)A\r\u{1B}[J" }
        if let permanent { text += permanent + "\n" }
        let frame = view.frame(at: now)
        text += frame.joined(separator: "\n") + "\n"
        drawnLines = frame.count
        lastDraw = now
        write(text)
    }

    /// The summary after the run.
    func finish(_ summary: BatchSummary, database: String) {
        lock.withLock {
            let now = Date()
            switch style {
            case .json:
                var object = view.totalsObject(at: now)
                object["event"] = "result"
                object["lineStopped"] = summary.lineStopped
                object["interrupted"] = summary.interrupted
                object["database"] = database
                object["pending"] = summary.pending
                if let line = LiveView.encode(object) { write(line + "\n") }
            case .terminal, .plain:
                if style == .terminal { redraw(now: now, permanent: nil) }
                write(
                    "batch \(summary.lineStopped ? "stopped" : summary.interrupted ? "interrupted" : "finished"): "
                        + "\(summary.done) done, \(summary.skipped) skipped, \(summary.failed) failed, \(summary.pending) pending; "
                        + "log: \(database)\n")
            }
        }
    }

    func message(_ text: String) {
        lock.withLock {
            if style == .json {
                if let line = LiveView.encode(["event": "message", "message": text]) { write(line + "\n") }
            } else {
                write(text + "\n")
            }
        }
    }

    private func write(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }
}
