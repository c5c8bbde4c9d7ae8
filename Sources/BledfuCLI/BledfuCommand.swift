import ArgumentParser
import CBuildInfo
import Foundation

/// The `bledfu` root command.
public struct BledfuCommand: AsyncParsableCommand {
    public static let version = "0.1.0"

    /// The commit this binary was built from, as the build stamped it (tools/package: `-Xcc -DBLEDFU_COMMIT=...`),
    /// or nil for a build that was not stamped.
    public static var commit: String? {
        let stamped = String(cString: bledfu_build_commit())
        return stamped.isEmpty ? nil : stamped
    }

    /// `bledfu --version`: `0.1.0 (commit 1a2b3c4d5e6f)`, or `0.1.0 (unknown commit)`.
    public static var versionText: String { "\(version) (\(commit.map { "commit \($0)" } ?? "unknown commit"))" }

    public static let configuration = CommandConfiguration(
        commandName: "bledfu",
        abstract: "Update the firmware of Bluetooth LE devices over raw ATT on Linux: Nordic Secure DFU, Legacy DFU, MCUmgr SMP.",
        discussion: BledfuExit.helpText,
        version: versionText,
        subcommands: subcommandTypes
    )

    public init() {}

    /// Parses `arguments`, runs the command, and turns every error into one line on standard error and a documented
    /// exit code. Returns the exit code.
    public static func runMain(arguments: [String] = Array(CommandLine.arguments.dropFirst())) async -> Int32 {
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            return BledfuExit.success
        } catch let error as CLIError {
            Console.error(error.message)
            return error.exitCode
        } catch {
            // Help, version and usage errors: let ArgumentParser print them as usual.
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if !message.isEmpty {
                if code == .success {
                    print(message)
                } else {
                    Console.errorRaw(message)
                }
            }
            return code.rawValue
        }
    }
}

/// Writes lines to standard output and standard error.
enum Console {
    static func error(_ message: String) {
        errorRaw("bledfu: error: \(message)")
    }

    static func warning(_ message: String) {
        errorRaw("bledfu: warning: \(message)")
    }

    static func errorRaw(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }

    /// One NDJSON object per line.
    static func json(_ object: [String: any Sendable]) {
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}
