import Foundation
import Testing

/// A real pseudo-terminal: a tmux window of a given size on a tmux server of its own (its own socket, so nothing
/// of anyone else's tmux is touched), running one shell command; the screen is read with `capture-pane`
/// (issue 19 point 1: tests assert on what a person sees).
// @unchecked: every stored property is a constant.
final class TmuxScreen: @unchecked Sendable {
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
        // The server this starts lives on: it must not inherit a pipe this process reads to its end.
        try run(arguments, capture: false)
    }

    deinit { _ = try? run(["-L", socket, "kill-server"], capture: false) }

    /// The screen's rows, wrapped rows joined (`capture-pane -J`): a line longer than the width is one that wrapped.
    func lines() throws -> [String] {
        let text = try run(["-L", socket, "capture-pane", "-p", "-J", "-t", session])
        var rows = text.components(separatedBy: "\n")
        while rows.last?.trimmingCharacters(in: .whitespaces).isEmpty == true { rows.removeLast() }
        return rows.map { String($0.reversed().drop(while: { $0 == " " }).reversed()) }
    }

    /// The screen with its text attributes (`capture-pane -e`: each colour, bold or underline as its SGR escape
    /// sequence, `ESC [ ... m`); plain text has none.
    func attributedText() throws -> String {
        try run(["-L", socket, "capture-pane", "-p", "-e", "-t", session])
    }

    func resize(width: Int, height: Int) throws {
        try run(["-L", socket, "resize-window", "-t", session, "-x", "\(width)", "-y", "\(height)"], capture: false)
    }

    /// The command's exit status once it ended, else nil.
    func exitStatus() throws -> Int32? {
        for line in try lines().reversed() where line.hasPrefix("[exit ") {
            return Int32(line.dropFirst("[exit ".count).dropLast())
        }
        return nil
    }

    /// Every screen read while watching (consecutive equal ones once), and whether the condition was met.
    struct Watch: Sendable {
        var screens: [[String]]
        var met: Bool
        var lines: [String] { screens.last ?? [] }
    }

    /// Reads the screen every 50 ms until `condition` holds for it or `timeout` passes, on a thread of its own (a
    /// long blocking poll on a cooperative thread starves the other tests: docs/reliability.md, "Starved pool").
    func watch(timeout: TimeInterval, until condition: @escaping @Sendable ([String]) -> Bool) async throws -> Watch {
        try await OffPool.run { [self] in
            var screens: [[String]] = []
            let met = try OffPool.blockingPoll(seconds: timeout, every: 0.05) {
                let screen = try self.lines()
                if screens.last != screen { screens.append(screen) }
                return condition(screen)
            }
            return Watch(screens: screens, met: met)
        }
    }

    /// Runs tmux with posix_spawn and reaps it with waitpid (not Foundation's Process: the client of `new-session`
    /// forks the server and exits at once, and Process never reaped it in this runner: the test hung on a zombie).
    /// With `capture`, standard output is read to its end (the client's only; the server has none of it).
    @discardableResult
    private func run(_ arguments: [String], capture: Bool = true) throws -> String {
        var fds: [Int32] = [-1, -1]
        if capture { guard pipe(&fds) == 0 else { throw TmuxError("pipe: errno \(errno)") } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if capture {
            posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
            posix_spawn_file_actions_addclose(&actions, fds[0])
            posix_spawn_file_actions_addclose(&actions, fds[1])
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // The runner's threads block most signals and children inherit the mask: tmux, the shell and the command in
        // its pane would never see SIGHUP, SIGTERM or SIGWINCH (kill-server then left the server running).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        sigdelset(&all, SIGKILL)
        sigdelset(&all, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([Self.tmux] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, Self.tmux, &actions, &attributes, argv, environ)
        if capture { close(fds[1]) }
        guard spawned == 0 else {
            if capture { close(fds[0]) }
            throw TmuxError("posix_spawn tmux: \(spawned)")
        }
        var output = [UInt8]()
        if capture {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(fds[0], &buffer, buffer.count)
                if count > 0 { output += buffer[0..<count]; continue }
                if count < 0 && errno == EINTR { continue }
                break
            }
            close(fds[0])
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return String(decoding: output, as: UTF8.self)
    }

    struct TmuxError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Quotes a word for sh.
    static func quote(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
