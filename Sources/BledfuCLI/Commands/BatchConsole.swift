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
    /// The frame on screen (terminal): redrawn in place, each line cut to the width (docs/batch.md, "Live view").
    private var region = LiveRegion()
    private var resize: SignalWatch?
    private var lastDraw = Date.distantPast
    /// Last percent and stage sent per device (--json sends a progress event only when one changed).
    private var lastProgress: [String: (Int, String)] = [:]

    init(json: Bool, startedAt: Date = Date()) {
        style = json ? .json : (TerminalOutput.standardOutput().redraws ? .terminal : .plain)
        view = LiveView(startedAt: startedAt)
        if style == .terminal {
            // SIGWINCH: draw the frame again at the new width at once.
            resize = SignalWatch(signals: [SIGWINCH]) { [weak self] _ in
                guard let self else { return }
                self.lock.withLock { self.redraw(now: Date(), permanent: nil) }
            }
        }
    }

    deinit { resize?.cancel() }

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

    /// Clears the old frame, prints `permanent` above it (it scrolls away), and draws the frame again, each line cut
    /// to the terminal's width now.
    private func redraw(now: Date, permanent: String?) {
        let text = region.redraw(
            view.frame(at: now), above: permanent.map { [$0] } ?? [], size: TerminalOutput.size(), newline: true)
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
                object["time"] = LiveView.timestamp(now)
                if let line = LiveView.encode(object) { write(line + "\n") }
            case .terminal, .plain:
                if style == .terminal {
                    resize?.cancel()
                    resize = nil
                    redraw(now: now, permanent: nil)
                }
                // Two lines: the counts fit 80 columns, the log's path goes on its own.
                write(
                    "batch \(summary.lineStopped ? "stopped" : summary.interrupted ? "interrupted" : "finished"): "
                        + "\(summary.done) done, \(summary.skipped) skipped, \(summary.failed) failed, \(summary.pending) pending\n"
                        + "log: \(database)\n")
            }
        }
    }

    func message(_ text: String) {
        lock.withLock {
            if style == .json {
                let object: [String: any Sendable] = ["event": "message", "message": text, "time": LiveView.timestamp(Date())]
                if let line = LiveView.encode(object) { write(line + "\n") }
            } else if style == .terminal, !region.drawn.isEmpty {
                redraw(now: Date(), permanent: text)  // above the frame, not through it
            } else {
                write(text + "\n")
            }
        }
    }

    private func write(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }
}
