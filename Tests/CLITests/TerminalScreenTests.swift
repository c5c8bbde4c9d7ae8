import Foundation
import Testing

@testable import BledfuCLI

/// `bledfu flash` in a real pseudo-terminal (tmux) at 80 and 200 columns and across a resize (issue 19 point 1):
/// at every screen read no line has wrapped (`capture-pane -J` joins wrapped rows: none is wider than the window)
/// and at most one progress line is on screen (no stale copy left by a redraw); the finished screen has the
/// steps as sentences, the final line with the running version, and no progress line left.
@Suite(.timeLimit(.minutes(10)), .serialized) struct TerminalScreenTests {
    static let inCI = ProcessInfo.processInfo.environment["CI"] == "true"

    struct Flash {
        let directory: URL
        let simulator: FlashSimulator
        let command: String
    }

    /// A simulated bracelet slow enough (speedup 8, a 96 KiB image: about 5 s alone) that the progress line is
    /// redrawn many times; `speedup` 2 makes it last long enough to resize the window in the middle.
    static func flash(speedup: Int = 8) async throws -> Flash {
        let directory = try FlashFixture.temporaryDirectory()
        let simulator = try await FlashSimulator(directory: directory, speedup: speedup)
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 96 * 1024)
        let words = [
            CLIRunner.binary.path, "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
            "--state-dir", directory.appendingPathComponent("state").path, "--key", FlashFixture.publicKey.path,
        ]
        return Flash(directory: directory, simulator: simulator, command: words.map(TmuxScreen.quote).joined(separator: " "))
    }

    static func progressRows(_ lines: [String]) -> [String] { lines.filter { $0.hasPrefix("part 1/1") } }

    /// What must hold at every moment at `width` columns: no line wrapped (`onlyProgress`: no progress line; after a
    /// shrink the lines printed before it wrap as every terminal rewraps old output, and only the redrawn line is
    /// ours to keep in bounds), and at most one progress line.
    static func expectFits(
        _ lines: [String], width: Int, onlyProgress: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for line in onlyProgress ? progressRows(lines) : lines where TerminalOutput.columns(of: line) > width {
            Issue.record("a line wrapped at \(width) columns: \(line)", sourceLocation: sourceLocation)
        }
        let progress = progressRows(lines)
        #expect(progress.count <= 1, "stale progress rows: \(progress)", sourceLocation: sourceLocation)
    }

    /// The finished screen: exit 0, sentences, the final line, no progress row left.
    static func expectFinished(_ lines: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        let screen = lines.joined(separator: "\n")
        #expect(lines.contains("[exit 0]"), "\(screen)", sourceLocation: sourceLocation)
        #expect(lines.contains { $0.hasPrefix("Sending part 1 of 1: application,") }, "\(screen)", sourceLocation: sourceLocation)
        #expect(
            lines.contains("Done: \(FlashFixture.device) now runs application version 2"), "\(screen)",
            sourceLocation: sourceLocation)
        #expect(lines.contains { $0.hasPrefix("Sent 98304 bytes in ") }, "\(screen)", sourceLocation: sourceLocation)
        #expect(progressRows(lines).isEmpty, "a progress row was left: \(screen)", sourceLocation: sourceLocation)
    }

    func run(width: Int, resizeTo: Int? = nil) async throws {
        try #require(TmuxScreen.available || !Self.inCI, "tmux is missing (tools/setup installs it)")
        guard TmuxScreen.available else { return }
        let flash = try await Self.flash(speedup: resizeTo == nil ? 8 : 2)
        defer {
            flash.simulator.stop()
            try? FileManager.default.removeItem(at: flash.directory)
        }
        let screen = try TmuxScreen(width: width, height: 24, command: flash.command)
        // Until the first progress line shows (before half of the upload, to resize in the middle of it).
        let first = try await screen.watch(timeout: 120) { lines in
            Self.progressRows(lines).contains { row in
                row.split(separator: " ").first { $0.hasSuffix("%") }.flatMap { Int($0.dropLast()) }.map { $0 < 50 } ?? false
            } || lines.contains { $0.hasPrefix("[exit") }
        }
        for lines in first.screens { Self.expectFits(lines, width: width) }
        #expect(!Self.progressRows(first.lines).isEmpty, "no progress line was seen: \(first.lines.joined(separator: "\n"))")
        // No colour (README): the screen with the progress line on it carries no text attribute.
        let attributed = try screen.attributedText()
        #expect(!attributed.contains("\u{1B}["), "an attribute on the screen: \(attributed.debugDescription)")
        var seen = first.screens.flatMap(Self.progressRows)
        var current = width
        if let resizeTo {
            try screen.resize(width: resizeTo, height: 24)
            current = resizeTo
            // The redraw after SIGWINCH replaces the reflowed line: wait (bounded) until the screen fits again.
            let fitted = try await screen.watch(timeout: 30) { lines in
                // A progress line drawn at the new width (one only, and no joined row of the old one left).
                let progress = Self.progressRows(lines)
                return progress.count == 1 && progress.allSatisfy { TerminalOutput.columns(of: $0) <= resizeTo }
            }
            #expect(fitted.met, "after the resize to \(resizeTo): \(fitted.lines.joined(separator: "\n"))")
        }
        let end = try await screen.watch(timeout: 300) { lines in lines.contains { $0.hasPrefix("[exit") } }
        for lines in end.screens { Self.expectFits(lines, width: current, onlyProgress: resizeTo != nil) }
        seen += end.screens.flatMap(Self.progressRows)
        #expect(end.met, "flash did not end: \(end.lines.joined(separator: "\n"))")
        Self.expectFinished(end.lines)
        #expect(!(try screen.attributedText()).contains("\u{1B}["), "an attribute on the final screen")
        if width >= 200 && resizeTo == nil {
            // Wide enough for every field: nothing was left out.
            #expect(seen.contains { $0.contains("retries") && $0.contains("kB/s") && $0.contains("ETA") }, "\(Set(seen))")
        } else {
            #expect(seen.allSatisfy { $0.contains("%") }, "the percentage is always kept: \(Set(seen))")
        }
    }

    @Test func flashAt80Columns() async throws { try await run(width: 80) }

    @Test func flashAt200Columns() async throws { try await run(width: 200) }

    @Test func flashAcrossAResizeFrom200To60() async throws { try await run(width: 200, resizeTo: 60) }

    /// A resize while nothing moves (the device stalls: no progress event comes): SIGWINCH alone redraws the line at
    /// the new width.
    @Test func aResizeRedrawsAtOnceWhileTheUploadStalls() async throws {
        try #require(TmuxScreen.available || !Self.inCI, "tmux is missing (tools/setup installs it)")
        guard TmuxScreen.available else { return }
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory, extraArguments: ["--fault", "stall-at=create-data#3"])
        defer { simulator.stop() }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: 64 * 1024)
        let words = [
            CLIRunner.binary.path, "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
            "--state-dir", directory.appendingPathComponent("state").path, "--timeout", "60", "--reconnect-attempts", "0",
        ]
        let screen = try TmuxScreen(width: 200, height: 24, command: words.map(TmuxScreen.quote).joined(separator: " "))
        // The line as it stands when the device stops answering: it does not change for 3 s.
        let drawn = try await screen.watch(timeout: 120) { lines in
            Self.progressRows(lines).first.map { !$0.contains(" 0% ") } ?? false
        }
        #expect(drawn.met, "\(drawn.lines.joined(separator: "\n"))")
        var before = try #require(Self.progressRows(drawn.lines).first)
        while true {
            let current = before
            let changed = try await screen.watch(timeout: 3) { lines in Self.progressRows(lines).first != current }
            guard changed.met, let next = Self.progressRows(changed.lines).first else { break }
            before = next
        }
        #expect(TerminalOutput.columns(of: before) > 60, "\(before)")
        let percent = try #require(before.split(separator: " ").first { $0.hasSuffix("%") })
        try screen.resize(width: 60, height: 24)
        let redrawn = try await screen.watch(timeout: 20) { lines in
            let progress = Self.progressRows(lines)
            return progress.count == 1 && progress.allSatisfy { TerminalOutput.columns(of: $0) <= 60 }
        }
        #expect(redrawn.met, "no redraw after the resize: \(redrawn.lines.joined(separator: "\n"))")
        #expect(Self.progressRows(redrawn.lines).first?.contains(" \(percent) ") == true, "the same progress, redrawn")
    }

    /// `bledfu batch`'s live view at 80 columns: four devices at once (lines of about 100 columns uncut), no line
    /// wraps, no frame is left behind (one totals line on screen at every moment), and the summary at the end.
    @Test func batchLiveViewAt80Columns() async throws {
        try #require(TmuxScreen.available || !Self.inCI, "tmux is missing (tools/setup installs it)")
        guard TmuxScreen.available else { return }
        let line = try BatchLine()
        defer { line.cleanUp() }
        try line.simulate(["bracelet:2", "sensor:2"], speedup: 20)
        try await line.waitForDevices(4)
        let plan = try line.writePlan(expect: 4, connections: 4)
        let words = [CLIRunner.binary.path, "batch", plan] + line.batchArguments
        let screen = try TmuxScreen(width: 80, height: 30, command: words.map(TmuxScreen.quote).joined(separator: " "))
        let end = try await screen.watch(timeout: 400) { lines in lines.contains { $0.hasPrefix("[exit") } }
        for lines in end.screens {
            for row in lines where TerminalOutput.columns(of: row) > 80 { Issue.record("a line wrapped at 80 columns: \(row)") }
            let totals = lines.filter { $0.hasPrefix("done ") && $0.contains("remaining") }
            #expect(totals.count <= 1, "stale totals lines: \(lines.joined(separator: "\n"))")
        }
        let sawFrame = end.screens.contains { lines in lines.contains { $0.hasPrefix("Bracelet-") || $0.hasPrefix("Sensor-") } }
        #expect(end.met, "batch did not end: \(end.lines.joined(separator: "\n"))")
        #expect(end.lines.contains("[exit 0]"), "\(end.lines.joined(separator: "\n"))")
        #expect(end.lines.contains("batch finished: 4 done, 0 skipped, 0 failed, 0 pending"), "\(end.lines.joined(separator: "\n"))")
        #expect(sawFrame, "no device line was seen in the live view")
    }

    /// TERM=dumb on a terminal: plain lines, no cursor movement (every line stays: the plain progress lines of
    /// every 10 %).
    @Test func dumbTerminalGetsPlainLines() async throws {
        try #require(TmuxScreen.available || !Self.inCI, "tmux is missing (tools/setup installs it)")
        guard TmuxScreen.available else { return }
        let flash = try await Self.flash()
        defer {
            flash.simulator.stop()
            try? FileManager.default.removeItem(at: flash.directory)
        }
        let screen = try TmuxScreen(width: 80, height: 50, command: "TERM=dumb " + flash.command)
        let end = try await screen.watch(timeout: 300) { lines in lines.contains { $0.hasPrefix("[exit") } }
        #expect(end.lines.contains("[exit 0]"), "\(end.lines.joined(separator: "\n"))")
        let plain = end.lines.filter { $0.hasPrefix("part 1/1: ") }
        #expect(plain.count >= 5, "plain progress lines every 10 %: \(end.lines.joined(separator: "\n"))")
        #expect(plain.last?.hasPrefix("part 1/1: 100%") == true)
    }
}
