import ArgumentParser
import BLECore
import Batch
import DFUCore
import DFUPackage
import DFUSimulator
import CBuildInfo
import Foundation
import GATT

/// The `bledfu` root command.
public struct BledfuCommand: AsyncParsableCommand {
    public static let version = "0.1.0"

    /// The commit this binary was built from, as tools/package stamped it into the binary's commit slot
    /// (CBuildInfo), or nil for a binary nobody stamped.
    public static var commit: String? {
        var buffer = [CChar](repeating: 0, count: 64)
        bledfu_build_commit(&buffer, buffer.count)
        let stamped = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
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
            if let mapped = CLIError(mapping: error) {
                Console.error(mapped.message)
                return mapped.exitCode
            }
            return renderParserError(error)
        }
    }

    /// Help and version go to standard output as ArgumentParser writes them; every other error (a usage error, a
    /// `ValidationError` from `validate()` or `run()`) becomes one `bledfu: error: …` line on standard error, with
    /// where to read more (`see 'bledfu flash --help'`) for a usage error, and exit 64 (ArgumentParser's own
    /// prefix `Error:` is never printed: one prefix for every error, issue 19 point 6).
    static func renderParserError(_ error: any Error) -> Int32 {
        let code = exitCode(for: error)
        if code == .success {
            let text = fullMessage(for: error)
            if !text.isEmpty { print(text) }
            return code.rawValue
        }
        let message = Self.message(for: error).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !message.isEmpty else { return code.rawValue }
        let lines = message.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        var line = lines.joined(separator: "; ")
        if let see = helpPointer(fullMessage(for: error)) { line += " (\(see))" }
        Console.error(line)
        return code.rawValue
    }

    /// `see 'bledfu flash --help'`, from ArgumentParser's usage text ("  See 'bledfu flash --help' for more
    /// information."), or nil.
    static func helpPointer(_ full: String) -> String? {
        guard let start = full.range(of: "See '"), let end = full[start.upperBound...].range(of: "'") else { return nil }
        return "see '\(full[start.upperBound..<end.lowerBound])'"
    }
}

extension CLIError {
    /// A library error that reached the command's top without being turned into a ``CLIError``: its message and
    /// its registry code (nil for ArgumentParser's errors and anything else).
    init?(mapping error: any Error) {
        switch error {
        case let error as AdapterError: self.init(error)
        case let error as ATTClientError: self.init(error)
        case let error as PackageError: self.init(error.message, exitCode: ExitCodeRegistry.code(for: error))
        case let error as DFUError: self.init(error.message, exitCode: ExitCodeRegistry.code(for: error))
        case let error as BatchLogError: self.init(error)
        case let error as SimulatorError: self.init(error.message, exitCode: ExitCodeRegistry.code(for: error))
        default: return nil
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

    /// One line on standard output, written at once (`print` buffers it when standard output is a file or a pipe,
    /// and a line that says the command waits must be seen while it waits).
    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func errorRaw(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }

    /// One NDJSON object per line, with its `time` (RFC 3339 UTC, docs/events.md).
    static func json(_ fields: [String: any Sendable]) {
        var object = fields
        if object["time"] == nil { object["time"] = LiveView.timestamp(Date()) }
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}
