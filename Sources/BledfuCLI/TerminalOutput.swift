import Foundation
import LinuxIO

/// What standard output is, for the commands that redraw (`flash`'s progress line, `batch`'s live view): a
/// terminal that takes cursor movement, or a pipe, a file or `TERM=dumb`, which get plain lines
/// (docs/development.md, "Terminal output"). bledfu prints no colour, so NO_COLOR has nothing to turn off.
///
/// Why not vapor/console-kit (4.16.2, in the local package copies): its `Terminal` asks the size with its own
/// `ioctl` (every syscall here goes through LinuxIO), decides on cursor commands from isatty alone on Linux
/// (`TERM=dumb` still gets them), counts a wrapped line as `count / width + 1` rows (one too many when the text fills
/// whole rows) at the width of the moment of writing (a resize since is not seen), has no SIGWINCH handling and
/// prints through stdio (`print` + `fflush`) while bledfu writes descriptors. What remains of ours is the small part
/// it would have given: measuring, cutting and the row count below.
struct TerminalOutput: Sendable {
    /// True when output redraws in place.
    let redraws: Bool

    /// Detects it for standard output: a terminal whose TERM is set and is not `dumb`.
    static func standardOutput(environment: [String: String] = ProcessInfo.processInfo.environment) -> TerminalOutput {
        let term = environment["TERM"] ?? ""
        return TerminalOutput(redraws: system_isatty(1) != 0 && !term.isEmpty && term != "dumb")
    }

    /// The terminal's size now (TIOCGWINSZ on standard output), else `$COLUMNS`/`$LINES`, else 80×24.
    static func size(environment: [String: String] = ProcessInfo.processInfo.environment) -> TerminalSize {
        if let size = TerminalSize.of(fd: 1) { return size }
        let columns = environment["COLUMNS"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? 80
        let rows = environment["LINES"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? 24
        return TerminalSize(columns: columns, rows: rows)
    }

    /// Columns a character takes: 2 for East Asian wide and emoji, 0 for combining marks and controls, else 1.
    static func columns(of character: Character) -> Int {
        guard let scalar = character.unicodeScalars.first else { return 0 }
        switch scalar.value {
        case 0..<0x20, 0x7F..<0xA0: return 0
        case 0x0300...0x036F, 0x200B...0x200F: return 0
        case 0x1100...0x115F, 0x2E80...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x1F300...0x1FAFF, 0x20000...0x3FFFD:
            return 2
        default: return 1
        }
    }

    /// Columns a line takes.
    static func columns(of text: String) -> Int { text.reduce(0) { $0 + columns(of: $1) } }

    /// The longest prefix of `text` that takes at most `width` columns.
    static func fit(_ text: String, width: Int) -> String {
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let next = used + columns(of: text[index])
            if next > width { break }
            used = next
            end = text.index(after: index)
        }
        return end == text.endIndex ? text : String(text[..<end])
    }

    /// `text` broken at spaces into lines of at most `width` columns (a sentence on a terminal: the terminal would
    /// otherwise break it anywhere); the lines after the first are indented by two spaces. A word longer than a
    /// line stands alone and is cut.
    static func wrap(_ text: String, width: Int) -> [String] {
        guard width > 8, columns(of: text) > width else { return [text] }
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: false).map(String.init) {
            let candidate = current.isEmpty ? word : current + " " + word
            if columns(of: candidate) <= width || current.isEmpty || current == "  " {
                current = candidate
                continue
            }
            lines.append(fit(current, width: width))
            current = "  " + word
        }
        lines.append(fit(current, width: width))
        return lines
    }

    /// Rows a line of `columns` columns takes at `width` columns (a terminal that reflows its lines on a resize,
    /// as tmux, VTE, kitty and Windows Terminal do, wraps it this way; an empty line takes one row).
    static func rows(columns: Int, width: Int) -> Int {
        guard width > 0, columns > width else { return 1 }
        return (columns + width - 1) / width
    }

    /// Joins `pieces` (in order) with spaces, leaving out the least important ones (highest `rank`) until the
    /// line fits `width`; then cuts what is left. Rank 0 pieces are never left out.
    static func line(_ pieces: [(text: String, rank: Int)], width: Int) -> String {
        var kept = pieces.filter { !$0.text.isEmpty }
        func joined() -> String { kept.map(\.text).joined(separator: " ") }
        while columns(of: joined()) > width, let worst = kept.map(\.rank).max(), worst > 0,
            let index = kept.lastIndex(where: { $0.rank == worst })
        {
            kept.remove(at: index)
        }
        return fit(joined(), width: width)
    }
}

/// Lines redrawn in place at the bottom of a terminal (the flash progress line, the batch live view): each redraw
/// moves the cursor back over the rows the last drawing takes *now* (at the current width: a narrower terminal has
/// wrapped them), erases to the end of the screen, prints the lines that scroll away (`above`, whole), then the new
/// lines each cut to the width. Nothing of an older drawing is left behind, at any width or after a resize.
struct LiveRegion {
    /// Columns of each line on screen (the last drawing).
    private(set) var drawn: [Int] = []
    /// Whether the cursor stays at the end of the last line (no newline after it: the flash progress line).
    private var open = false

    /// The text that replaces the last drawing with `lines` (at most `size.rows - 1` of them are shown, the last one
    /// saying how many were left out), printing `above` first.
    mutating func redraw(_ lines: [String], above: [String] = [], size: TerminalSize, newline: Bool) -> String {
        var text = erase(width: size.columns)
        for line in above { text += line + "\n" }
        var shown = lines
        let limit = max(1, size.rows - 1)
        if shown.count > limit {
            shown = Array(shown.prefix(limit - 1)) + ["... \(lines.count - limit + 1) more"]
        }
        let cut = shown.map { TerminalOutput.fit($0, width: size.columns) }
        text += cut.joined(separator: "\n") + (newline ? "\n" : "")
        drawn = cut.map(TerminalOutput.columns(of:))
        open = !newline
        return text
    }

    /// The text that erases the last drawing and forgets it (the cursor ends where it began).
    mutating func erase(width: Int) -> String {
        guard !drawn.isEmpty else { return "" }
        let rows = drawn.reduce(0) { $0 + TerminalOutput.rows(columns: $1, width: width) }
        // Without a newline the cursor is on the drawing's last row; with one, on the row below it.
        let up = open ? rows - 1 : rows
        drawn = []
        open = false
        return "\r" + (up > 0 ? "\u{1B}[\(up)A" : "") + "\u{1B}[J"
    }
}
