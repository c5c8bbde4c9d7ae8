import ArgumentParser
import Batch
import BLECore
import Crypto
import DFUPackage
import Foundation

/// `bledfu package`: inspect, verify and create Nordic DFU packages (docs/packages.md).
public struct PackageCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "package",
        abstract: "Inspect, verify and create Nordic DFU packages (.zip) and MCUboot images (.bin, .hex, dfu_application.zip).",
        discussion: """
            Exit codes for package errors: 30 invalid archive, 31 unsafe entry name, 32 entry or archive too large, \
            33 corrupt entry (CRC), 34 invalid manifest, 35 file named by the manifest missing, 36 invalid init packet, \
            37 image does not match its init packet, 38 signature invalid, 39 other (key file, create input, I/O).
            """,
        subcommands: [PackageInspect.self, PackageVerify.self, PackageCreate.self, PackageKeysCommand.self]
    )

    public init() {}
}

/// Helpers shared by the package subcommands.
enum PackageCLI {
    static func cliError(_ error: PackageError) -> CLIError {
        CLIError(error.message, exitCode: ExitCodeRegistry.code(for: error))
    }

    /// After a listing (`inspect`, `verify`): each failed check but the first on its own `bledfu: error:` line, the
    /// first thrown, so the command exits with its code (30-39); nothing when every check held.
    static func fail(on errors: [PackageError]) throws(CLIError) {
        guard let first = errors.first else { return }
        for error in errors.dropFirst() { Console.error(error.message) }
        throw cliError(first)
    }

    static func load(_ path: String) throws -> FirmwarePackage {
        do {
            return try FirmwarePackage(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw cliError(error)
        }
    }

    static func publicKeys(_ paths: [String]) throws -> [P256.Signing.PublicKey] {
        do {
            return try paths.map { path throws(PackageError) in
                try PackageKeys.publicKey(pem: try PackageKeys.readPEM(URL(fileURLWithPath: path)), name: path)
            }
        } catch {
            throw cliError(error)
        }
    }

    static func hex32(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }

    /// Parses `0xB7`, `183`, or a comma list of those (nrfutil `--sd-req 0xB7,0x101`).
    static func parseIntegers(_ text: String, option: String) throws -> [UInt32] {
        try text.split(separator: ",").map { item in
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            let value = trimmed.lowercased().hasPrefix("0x") ? UInt32(trimmed.dropFirst(2), radix: 16) : UInt32(trimmed)
            guard let value else { throw ValidationError("\(option): '\(trimmed)' is not a number (decimal or 0x hex)") }
            return value
        }
    }

    static func parseInteger(_ text: String, option: String) throws -> UInt32 {
        let values = try parseIntegers(text, option: option)
        guard values.count == 1, let value = values.first else { throw ValidationError("\(option): expected one number") }
        return value
    }

    /// Writes a file atomically.
    static func write(_ bytes: [UInt8], to path: String) throws {
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CLIError(FileProblem.describe("write", path, error), exitCode: ExitCodeRegistry.code(for: PackageError(.io, "")))
        }
    }
}

extension PackageCLI {
    static func loadForFlash(_ path: String) throws(CLIError) -> FirmwarePackage {
        do { return try load(path) } catch let error as CLIError { throw error } catch { throw CLIError("\(error)", exitCode: BledfuExit.packageInvalid) }
    }

    static func publicKeysForFlash(_ paths: [String]) throws(CLIError) -> [P256.Signing.PublicKey] {
        do {
            return try publicKeys(paths)
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("\(error)", exitCode: BledfuExit.packageInvalid)
        }
    }
}
