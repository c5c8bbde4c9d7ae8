import DFUCore
import Foundation
import LinuxIO
import Synchronization

/// How `bledfu flash` shows an update's events: a live bar on a terminal, plain lines about every 10 % otherwise,
/// NDJSON with `--json` (``UpdateEventRecord``: the event and the seconds since the command started; docs/events.md).
/// It renders; it decides nothing about the update.
final class FlashRenderer: Sendable {
    enum Style { case terminal, plain, json }

    private struct State {
        var lastPercent = -1
        var lastObject: Int?
        var lastBarUpdate = ContinuousClock.now.advanced(by: .seconds(-10))
        var barShown = false
    }

    let style: Style
    private let started = ContinuousClock.now
    private let state = Mutex(State())

    init(json: Bool) {
        style = json ? .json : (system_isatty(1) != 0 ? .terminal : .plain)
    }

    /// Seconds since the command started, millisecond precision.
    var elapsed: Double {
        let (seconds, attoseconds) = started.duration(to: .now).components
        return ((Double(seconds) + Double(attoseconds) / 1e18) * 1000).rounded() / 1000
    }

    /// Writes one event (json) or its line for people.
    func render(_ event: UpdateEvent) {
        state.withLock { state in
            switch style {
            case .json: renderJSON(event, &state)
            case .terminal, .plain: renderText(event, &state)
            }
        }
    }

    private func renderJSON(_ event: UpdateEvent, _ state: inout State) {
        if case .progress(let p) = event {
            guard p.percent != state.lastPercent || p.object != state.lastObject else { return }
            state.lastPercent = p.percent
            state.lastObject = p.object
        }
        if case .uploading = event {
            state.lastPercent = -1
            state.lastObject = nil
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(UpdateEventRecord(event, elapsed: elapsed)) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    private func renderText(_ event: UpdateEvent, _ state: inout State) {
        switch event {
        case .progress(let p): renderProgress(p, &state)
        case .warning(let text):
            if state.barShown { line("", &state) }
            Console.warning(text)
        case .message(let text): line(text, &state)
        case .uploading:
            state.lastPercent = -1
            state.lastObject = nil
            line(Self.describe(event), &state)
        case .result, .unknown: break
        default: line(Self.describe(event), &state)
        }
    }

    /// "connecting: address=C0:FF:EE:00:00:01" (the state and its fields, sorted).
    static func describe(_ event: UpdateEvent) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(event),
            let fields = try? JSONDecoder().decode([String: TextField].self, from: data)
        else { return "\(event)" }
        let name = fields["state"]?.text ?? fields["event"]?.text ?? ""
        let details = fields.filter { $0.key != "event" && $0.key != "state" }.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value.text)" }.joined(separator: " ")
        return details.isEmpty ? name : "\(name): \(details)"
    }

    private func renderProgress(_ p: UpdateProgress, _ state: inout State) {
        let object = p.object.map { " obj \($0)/\(p.objects ?? 0)" } ?? ""
        switch style {
        case .json: return
        case .plain:
            guard p.percent / 10 != state.lastPercent / 10 || state.lastPercent < 0 else { return }
            Self.out(
                "part \(p.part)/\(p.parts): \(p.percent)% (\(p.bytes)/\(p.total) bytes, \(Self.kB(p.bytesPerSecond)) kB/s)\n")
        case .terminal:
            let now = ContinuousClock.now
            guard state.lastBarUpdate.duration(to: now) > .milliseconds(100) || p.bytes == p.total else { return }
            state.lastBarUpdate = now
            let width = 24
            let filled = p.total > 0 ? width * p.bytes / p.total : width
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: max(0, width - filled))
            let eta = p.etaSeconds.map { "\($0 / 60):" + String(format: "%02d", $0 % 60) } ?? "--:--"
            let text = "part \(p.part)/\(p.parts) [\(bar)] \(p.percent)%\(object) \(p.bytes)/\(p.total) B "
                + "\(Self.kB(p.bytesPerSecond)) kB/s (avg \(Self.kB(p.averageBytesPerSecond))) ETA \(eta) retries \(p.retries)"
            FileHandle.standardOutput.write(Data(("\r\u{1B}[K" + text).utf8))
            state.barShown = true
        }
        state.lastPercent = p.percent
        state.lastObject = p.object
    }

    private func line(_ text: String, _ state: inout State) {
        if state.barShown {
            FileHandle.standardOutput.write(Data("\r\u{1B}[K".utf8))
            state.barShown = false
        }
        Self.out(text + "\n")
    }

    /// The final summary and, with `--json`, the result event.
    func finish(_ summary: UpdateSummary) {
        if style == .json {
            render(.result(summary))
            return
        }
        state.withLock { state in
            let seconds = String(format: "%.1f", summary.seconds)
            line(
                "\(summary.success ? "done" : "stopped") in \(seconds) s: \(summary.bytesSent) bytes sent at "
                    + "\(Self.kB(summary.averageBytesPerSecond)) kB/s average, \(summary.bytesResent) resent, "
                    + "\(summary.checkpoints) checkpoint(s), \(summary.reconnects) reconnect(s)", &state)
            if summary.success, let message = summary.message { line(message, &state) }
        }
    }

    static func out(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }

    static func kB(_ bytesPerSecond: Int) -> String { String(format: "%.1f", Double(bytesPerSecond) / 1000) }
}

/// A JSON scalar as text (for the plain rendering of an event's fields).
private struct TextField: Decodable {
    var text: String

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            text = "\(value)"
        } else if let value = try? container.decode(Int.self) {
            text = "\(value)"
        } else if let value = try? container.decode(Double.self) {
            text = "\(value)"
        } else {
            text = (try? container.decode(String.self)) ?? ""
        }
    }
}
