import ArgumentParser
import Batch
import BLECore
import Foundation
import BledfuKit
import DFUCore

/// `bledfu resume [--device ADDR]`: continue the upload a journal describes (after Ctrl-C or exit 43).
struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Continue an interrupted `bledfu flash` from its journal.",
        discussion: """
            Reads the newest journal in the state directory (for --device, that device's), which records the \
            package path, and continues the upload from the last executed object. Running the same \
            `bledfu flash` command again does the same.

            \(FlashExit.helpText)
            """)

    @OptionGroup var options: GlobalOptions
    @Option(name: .long, help: ArgumentHelp("The device address (default: the newest journal's).", valueName: "address"))
    var device: String?
    @Option(
        name: .long, help: "A PEM public (or private) key the package's init packets must verify with (repeatable).",
        completion: Completions.key)
    var key: [String] = []
    @Option(name: .long, help: "Which parts to send: system, application or all.") var scope: FlashScope = .all
    @OptionGroup var flash: FlashOptions

    func run() async throws {
        let directory = flash.stateDirectory
        let wanted = try device.map(parseAddress)
        let journals = JournalFileStore.all(in: directory).filter { entry in
            wanted == nil || BluetoothAddress(entry.file.journal.deviceAddress) == wanted
        }
        guard let newest = journals.first, let address = BluetoothAddress(newest.file.journal.deviceAddress) else {
            throw CLIError(
                "no unfinished upload\(device.map { " for \($0)" } ?? "") in \(directory.path)", exitCode: BledfuExit.failure)
        }
        let package = newest.file.packagePath
        let sha: String
        do {
            sha = try PackageSource(contentsOf: URL(fileURLWithPath: package)).sha256
        } catch {
            throw CLIError(error.message, exitCode: BledfuExit.packageInvalid)
        }
        guard sha == newest.file.journal.packageSHA256.lowercased() else {
            throw CLIError(
                "\(package) changed since the upload started (its SHA-256 differs from the journal's); start again with bledfu flash",
                exitCode: BledfuExit.failure)
        }
        var global = options
        if global.adapter == "any", newest.file.adapter != "any" { global.adapter = newest.file.adapter }
        var settings = flash.settings(package: package, keys: key, scope: scope, target: .address(address), global: global)
        if let type = AddressType(rawValue: newest.file.addressType) { settings.addressType = type }
        try await runFlash(settings)
    }
}
