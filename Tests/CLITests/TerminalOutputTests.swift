import DFUCore
import Foundation
import LinuxIO
import Testing

@testable import BledfuCLI

/// The pieces the redrawn lines are made of: measuring, cutting, the rows a line takes after a resize, and the
/// escape sequences a redraw writes (TerminalScreenTests runs them in a real terminal).
@Suite(.timeLimit(.minutes(1))) struct TerminalOutputTests {
    @Test func measuresAndCutsByColumns() {
        #expect(TerminalOutput.columns(of: "part 1/1") == 8)
        #expect(TerminalOutput.columns(of: "日本") == 4)
        #expect(TerminalOutput.fit("abcdef", width: 4) == "abcd")
        #expect(TerminalOutput.fit("ab日本", width: 5) == "ab日")
        #expect(TerminalOutput.fit("abc", width: 80) == "abc")
    }

    @Test func sentencesBreakAtSpacesWithinTheWidth() {
        let text = "checked before the jump: application: hardware version 52 (Hardware Revision \"52\")"
        let lines = TerminalOutput.wrap(text, width: 30)
        #expect(lines == [
            "checked before the jump:", "  application: hardware", "  version 52 (Hardware", "  Revision \"52\")",
        ])
        #expect(lines.allSatisfy { TerminalOutput.columns(of: $0) <= 30 })
        // Short enough: unchanged; a word longer than the width stands alone, cut.
        #expect(TerminalOutput.wrap("Done", width: 30) == ["Done"])
        #expect(TerminalOutput.wrap("a " + String(repeating: "x", count: 40) + " b", width: 20) == [
            "a", "  " + String(repeating: "x", count: 18), "  b",
        ])
    }

    @Test func rowsAfterAReflow() {
        #expect(TerminalOutput.rows(columns: 0, width: 80) == 1)
        #expect(TerminalOutput.rows(columns: 80, width: 80) == 1)
        #expect(TerminalOutput.rows(columns: 81, width: 80) == 2)
        #expect(TerminalOutput.rows(columns: 160, width: 80) == 2)  // console-kit counts 3 here
        #expect(TerminalOutput.rows(columns: 150, width: 60) == 3)
    }

    @Test func leastUsefulPiecesGoFirst() {
        let pieces: [(text: String, rank: Int)] = [("part 1/1", 0), ("45%", 0), ("ETA 0:10", 1), ("retries 0", 8)]
        #expect(TerminalOutput.line(pieces, width: 80) == "part 1/1 45% ETA 0:10 retries 0")
        #expect(TerminalOutput.line(pieces, width: 21) == "part 1/1 45% ETA 0:10")
        #expect(TerminalOutput.line(pieces, width: 12) == "part 1/1 45%")
        #expect(TerminalOutput.line(pieces, width: 5) == "part ")
    }

    @Test func progressLineFitsEveryWidth() {
        let progress = UpdateProgress(
            part: 1, parts: 2, object: 3, objects: 38, bytes: 12_288, total: 152_392, bytesPerSecond: 9_800,
            averageBytesPerSecond: 9_500, retries: 1, bytesResent: 0, etaSeconds: 14)
        let wide = FlashText.progress(progress, width: 200)
        #expect(wide == "part 1/2 [#-----------------------] 8% obj 3/38 12288/152392 B 9.8 kB/s (avg 9.5) ETA 0:14 retries 1")
        for width in [20, 40, 60, 80, 100] {
            let line = FlashText.progress(progress, width: width)
            #expect(TerminalOutput.columns(of: line) <= width, "\(width): \(line)")
            #expect(line.hasPrefix("part 1/2"), "\(width): \(line)")
        }
        #expect(FlashText.progress(progress, width: 80).contains("ETA 0:14"))
    }

    /// A redraw moves up over the old drawing as it is wrapped at the current width, erases, and cuts the new lines.
    @Test func regionRedrawsOverWhatIsOnScreenNow() {
        var region = LiveRegion()
        let wide = TerminalSize(columns: 200, rows: 24)
        let first = region.redraw([String(repeating: "a", count: 150), "totals"], size: wide, newline: true)
        #expect(first == String(repeating: "a", count: 150) + "\ntotals\n")
        // Same width: two rows up.
        let again = region.redraw(["b", "totals"], above: ["done C6:05:04:03:02:01"], size: wide, newline: true)
        #expect(again == "\r\u{1B}[2A\u{1B}[Jdone C6:05:04:03:02:01\nb\ntotals\n")
        // The 150-column line before a shrink to 60 takes 3 rows there.
        _ = region.redraw([String(repeating: "c", count: 150), "totals"], size: wide, newline: true)
        let narrow = TerminalSize(columns: 60, rows: 24)
        let shrunk = region.redraw([String(repeating: "d", count: 150), "totals"], size: narrow, newline: true)
        #expect(shrunk == "\r\u{1B}[4A\u{1B}[J" + String(repeating: "d", count: 60) + "\ntotals\n")
    }

    /// The flash line has no newline: the cursor stays on its last row.
    @Test func openLineMovesUpOnlyOverItsExtraRows() {
        var region = LiveRegion()
        let wide = TerminalSize(columns: 120, rows: 24)
        #expect(region.redraw([String(repeating: "x", count: 100)], size: wide, newline: false) == String(repeating: "x", count: 100))
        #expect(region.redraw(["y"], size: wide, newline: false) == "\r\u{1B}[J" + "y")
        _ = region.redraw([String(repeating: "x", count: 100)], size: wide, newline: false)
        #expect(region.erase(width: 40) == "\r\u{1B}[2A\u{1B}[J")
        #expect(region.erase(width: 40) == "")
    }

    @Test func aFrameTallerThanTheWindowIsShortened() {
        var region = LiveRegion()
        let text = region.redraw((1...30).map { "device \($0)" }, size: TerminalSize(columns: 80, rows: 10), newline: true)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 9)
        #expect(lines.last == "... 22 more")
    }

    /// TIOCGWINSZ goes through LinuxIO's wrapper with the C shim's struct: a pipe is no terminal.
    @Test func windowSizeOfAPipeIsNil() throws {
        let pipe = Pipe()
        #expect(TerminalSize.of(fd: pipe.fileHandleForWriting.fileDescriptor) == nil)
    }

    /// The size comes from TIOCGWINSZ on standard output through the wrapper (scripted here: 24 rows, 132 columns).
    @Test func windowSizeIsTheKernelsAnswer() throws {
        let mock = SyscallMock(script: [.bytes("ioctl", [24, 0, 132, 0, 0, 0, 0, 0])])
        let size = mock.run { () -> TerminalSize? in TerminalSize.of(fd: 1) }
        #expect(mock.violations.isEmpty)
        #expect(mock.calls.first?.arguments == [1, 0x5413])
        #expect(size == TerminalSize(columns: 132, rows: 24))
        // A terminal nobody sized (0 columns) falls back to $COLUMNS.
        let unsized = SyscallMock(script: [.bytes("ioctl", [0, 0, 0, 0, 0, 0, 0, 0])])
        #expect(unsized.run { TerminalOutput.size(environment: ["COLUMNS": "100", "LINES": "40"]) } == TerminalSize(columns: 100, rows: 40))
    }

    @Test func dumbOrUnsetTermDoesNotRedraw() {
        #expect(!TerminalOutput.standardOutput(environment: ["TERM": "dumb"]).redraws)
        #expect(!TerminalOutput.standardOutput(environment: [:]).redraws)
    }
}
