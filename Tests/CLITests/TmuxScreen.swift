import Foundation
import Testing

/// A real pseudo-terminal: a tmux window of a given size on a tmux server of its own (its own socket, so nothing
/// of anyone else's tmux is touched), running one shell command; the screen is read with `capture-pane`
/// (issue 19 point 1: tests assert on what a person sees).
final class TmuxScreen {
    static let tmux = "/usr/bin/tmux"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: tmux) }

    let socket = "bledfu-test-\(UUID().uuidString.prefix(8))"
    let session = "s"

    /// Starts `command` (run by sh) in a window of `width` × `height` cells. When the command ends the pane shows
    /// `[exit N]` and stays (so the last screen can be read).
    init(width: Int, height: Int, command: String, environment: [String: String] = [:]) throws {
        var arguments = ["-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "\(width)", "-y", "\(height)"]
        for (key, value) in environment.sorted(by: { $0.key < $1.key }) { arguments += ["-e", "\(key)=\(value)"] }
        arguments.append("\(command); echo \"[exit $?]\"; exec sleep 600")
        try run(arguments)
    }

    deinit { _ = try? run(["-L", socket, "kill-server"]) }

    /// The screen's rows, wrapped rows joined (`capture-pane -J`): a line longer than the width is one that wrapped.
    func lines() throws -> [String] {
        let text = try run(["-L", socket, "capture-pane", "-p", "-J", "-t", session])
        var rows = text.components(separatedBy: "\n")
        while rows.last?.trimmingCharacters(in: .whitespaces).isEmpty == true { rows.removeLast() }
        return rows.map { String($0.reversed().drop(while: { $0 == " " }).reversed()) }
    }

    func resize(width: Int, height: Int) throws {
        try run(["-L", socket, "resize-window", "-t", session, "-x", "\(width)", "-y", "\(height)"])
    }

    /// The command's exit status once it ended, else nil.
    func exitStatus() throws -> Int32? {
        for line in try lines().reversed() where line.hasPrefix("[exit ") {
            return Int32(line.dropFirst("[exit ".count).dropLast())
        }
        return nil
    }

    /// Polls the screen every 20 ms until `condition` holds for it or `timeout` passes; `each` sees every screen
    /// read on the way (the assertions that must hold at every moment). Returns the last screen and whether the
    /// condition held.
    @discardableResult
    func watch(timeout: TimeInterval, each: ([String]) -> Void = { _ in }, until condition: ([String]) -> Bool) throws
        -> (lines: [String], met: Bool)
    {
        let deadline = Date().addingTimeInterval(timeout)
        var screen: [String] = []
        while Date() < deadline {
            screen = try lines()
            each(screen)
            if condition(screen) { return (screen, true) }
            usleep(20_000)
        }
        return (screen, false)
    }

    @discardableResult
    private func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.tmux)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Quotes a word for sh.
    static func quote(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
