import Foundation
import PlatformIO
import SecureDFU
import SystemPackage

/// One journal file as stored on disk: the engine's journal plus what `bledfu resume` needs to start again.
///
///     {"packagePath":"/abs/app.zip","adapter":"hci0","addressType":"random","updated":"2026-11-21T02:40:00Z",
///      "journal":{"deviceAddress":"C0:FF:EE:00:00:01","packageSHA256":"9f86…","partIndex":0,"executed":[…]}}
struct JournalFile: Codable, Hashable, Sendable {
    var packagePath: String
    var adapter: String
    var addressType: String
    var updated: String
    var journal: DFUJournal
}

/// ``JournalStore`` over one JSON file per (device address, package SHA-256) in a state directory
/// (`--state-dir`, else `$XDG_STATE_HOME/bledfu`, else `~/.local/state/bledfu`). Every save writes a temporary file
/// and renames it over the old one, so a crash leaves either the old or the new journal.
final class JournalFileStore: JournalStore, @unchecked Sendable {
    let directory: URL
    let packagePath: String
    let adapter: String
    let addressType: String
    /// Called after every successful save (the Ctrl-C safe point hangs here).
    private let onSaved: @Sendable (DFUJournal) async -> Void
    private let lock = NSLock()

    init(
        directory: URL, packagePath: String, adapter: String, addressType: String,
        onSaved: @escaping @Sendable (DFUJournal) async -> Void = { _ in }
    ) {
        self.directory = directory
        self.packagePath = packagePath
        self.adapter = adapter
        self.addressType = addressType
        self.onSaved = onSaved
    }

    /// The default state directory for this environment.
    static func defaultDirectory(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("bledfu")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/state/bledfu")
    }

    /// `C0FFEE000001-<sha256>.json`.
    static func fileName(deviceAddress: String, packageSHA256: String) -> String {
        let address = deviceAddress.uppercased().filter { $0.isHexDigit }
        return "\(address)-\(packageSHA256.lowercased()).json"
    }

    func url(deviceAddress: String, packageSHA256: String) -> URL {
        directory.appendingPathComponent(Self.fileName(deviceAddress: deviceAddress, packageSHA256: packageSHA256))
    }

    func load(deviceAddress: String, packageSHA256: String) async throws(JournalStoreError) -> DFUJournal? {
        try loadFile(url(deviceAddress: deviceAddress, packageSHA256: packageSHA256))?.journal
    }

    func save(_ journal: DFUJournal) async throws(JournalStoreError) {
        let file = JournalFile(
            packagePath: packagePath, adapter: adapter, addressType: addressType,
            updated: ISO8601DateFormatter().string(from: Date()), journal: journal)
        let target = url(deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            let data = try encoder.encode(file)
            try lock.withLock {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                let process = ProcessInfo.processInfo.processIdentifier
                let temporary = directory.appendingPathComponent(".\(target.lastPathComponent).\(process).tmp")
                do throws(Errno) {
                    try FileIO.writeAtomically(target.path, Array(data), temporaryPath: temporary.path)
                } catch {
                    try? FileManager.default.removeItem(at: temporary)
                    throw JournalStoreError("cannot write \(target.path): \(error)")
                }
            }
        } catch let error as JournalStoreError {
            throw error
        } catch {
            throw JournalStoreError("cannot write \(target.path): \(error.localizedDescription)")
        }
        await onSaved(journal)
    }

    func remove(deviceAddress: String, packageSHA256: String) async throws(JournalStoreError) {
        let target = url(deviceAddress: deviceAddress, packageSHA256: packageSHA256)
        guard FileManager.default.fileExists(atPath: target.path) else { return }
        do {
            try FileManager.default.removeItem(at: target)
        } catch {
            throw JournalStoreError("cannot remove \(target.path): \(error.localizedDescription)")
        }
    }

    /// Reads one journal file; nil when it does not exist.
    func loadFile(_ url: URL) throws(JournalStoreError) -> JournalFile? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try JSONDecoder().decode(JournalFile.self, from: Data(contentsOf: url))
        } catch {
            throw JournalStoreError("\(url.path) is not a bledfu journal: \(error.localizedDescription)")
        }
    }

    /// Every journal in `directory`, newest first (for `bledfu resume`).
    static func all(in directory: URL) -> [(url: URL, file: JournalFile)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var found: [(url: URL, file: JournalFile)] = []
        for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
            let url = directory.appendingPathComponent(name)
            guard let data = try? Data(contentsOf: url), let file = try? JSONDecoder().decode(JournalFile.self, from: data)
            else { continue }
            found.append((url, file))
        }
        return found.sorted { $0.file.updated > $1.file.updated }
    }
}
