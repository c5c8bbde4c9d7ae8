import Batch
import DFUCore
import Foundation
import LinuxIO
import Synchronization

/// How `bledfu flash` shows an update's events: on a terminal a progress line redrawn in place (cut to the
/// terminal's width, redrawn at once when the window is resized), plain lines about every 10 % on a pipe, a file
/// or `TERM=dumb`, NDJSON with `--json` (``UpdateEventRecord``: the event, the seconds since the command started and
/// the wall-clock time; docs/events.md). `-q` keeps errors and the final line, `-v` adds detail. It renders; it
/// decides nothing about the update.
final class FlashRenderer: Sendable {
    enum Style { case terminal, plain, json }

    private struct State {
        var lastPercent = -1
        var lastObject: Int?
        var lastBarUpdate = ContinuousClock.now.advanced(by: .seconds(-10))
        var region = LiveRegion()
        /// The progress shown on the terminal (redrawn after a resize).
        var shown: UpdateProgress?
    }

    let style: Style
    let detail: OutputDetail
    private let started = ContinuousClock.now
    private let startedAt = Date()
    private let state = Mutex(State())
    private let resize = Mutex<SignalWatch?>(nil)

    init(json: Bool, detail: OutputDetail = .normal) {
        style = json ? .json : (TerminalOutput.standardOutput().redraws ? .terminal : .plain)
        self.detail = detail
        if style == .terminal {
            // SIGWINCH: redraw the progress line at the new width at once (LiveRegion counts the rows the old one
            // takes now).
            let watch = SignalWatch(signals: [SIGWINCH]) { [weak self] _ in self?.redrawAfterResize() }
            resize.withLock { $0 = watch }
        }
    }

    deinit { resize.withLock { $0?.cancel() } }

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
        let record = UpdateEventRecord(event, elapsed: elapsed, time: LiveView.timestamp(startedAt.addingTimeInterval(elapsed)))
        guard let line = JSONLine.text(record) else { return }
        FileHandle.standardOutput.write(Data(line.utf8))
    }

    private func renderText(_ event: UpdateEvent, _ state: inout State) {
        switch event {
        case .progress(let p):
            if detail > .quiet { renderProgress(p, &state) }
        case .warning(let text):
            guard detail > .quiet else { return }
            clearBar(&state)
            Console.warning(text)
        case .uploading:
            state.lastPercent = -1
            state.lastObject = nil
            if detail > .quiet, let text = FlashText.sentence(event) { line(text, &state) }
        default:
            if detail > .quiet, let text = FlashText.sentence(event) { line(text, &state) }
        }
    }

    private func renderProgress(_ p: UpdateProgress, _ state: inout State) {
        switch style {
        case .json: return
        case .plain:
            let step = detail == .verbose ? 1 : 10
            guard p.percent / step != state.lastPercent / step || state.lastPercent < 0 else { return }
            Self.out(FlashText.plainProgress(p) + "\n")
        case .terminal:
            let now = ContinuousClock.now
            guard state.lastBarUpdate.duration(to: now) > .milliseconds(100) || p.bytes == p.total else { return }
            state.lastBarUpdate = now
            state.shown = p
            drawBar(p, &state)
        }
        state.lastPercent = p.percent
        state.lastObject = p.object
    }

    private func drawBar(_ p: UpdateProgress, _ state: inout State) {
        let size = TerminalOutput.size()
        Self.out(state.region.redraw([FlashText.progress(p, width: size.columns)], size: size, newline: false))
    }

    private func redrawAfterResize() {
        state.withLock { state in
            guard let shown = state.shown else { return }
            drawBar(shown, &state)
        }
    }

    private func clearBar(_ state: inout State) {
        guard state.shown != nil else { return }
        Self.out(state.region.erase(width: TerminalOutput.size().columns))
        state.shown = nil
    }

    private func line(_ text: String, _ state: inout State) {
        clearBar(&state)
        guard style == .terminal else { return Self.out(text + "\n") }
        // On a terminal a sentence breaks at spaces within its width.
        Self.out(TerminalOutput.wrap(text, width: TerminalOutput.size().columns).joined(separator: "\n") + "\n")
    }

    /// The final line(s) and, with `--json`, the result event. `version` is what now runs ("application version
    /// 2"), `device` the device's address.
    func finish(_ summary: UpdateSummary, version: String? = nil, device: String = "the device") {
        if style == .json {
            render(.result(summary))
            return
        }
        state.withLock { state in
            clearBar(&state)
            let lines = FlashText.final(summary, version: version, device: device)
            // -q: the final line only (what runs now, or after a failure the counters; the error line follows).
            for text in detail == .quiet ? Array(lines.prefix(1)) : lines { line(text, &state) }
        }
    }

    static func out(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }
}
