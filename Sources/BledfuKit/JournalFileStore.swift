import DFUCore
import Foundation
import LinuxIO
import SystemPackage

/// One journal file as stored on disk: the updater's journal plus what `bledfu resume` needs to start again.
///
///     {"packagePath":"/abs/app.zip","adapter":"hci0","addressType":"random","updated":"2026-11-21T02:40:00Z",
///      "journal":{"deviceAddress":"C0:FF:EE:00:00:01","packageSHA256":"9f86…","family":"secure","partIndex":0,
///                 "confirmedBytes":4096,"resume":{"executed":[…]}}}
///
/// Files written before families existed (`"journal":{…,"executed":[…]}`) read as Secure DFU journals.
public struct JournalFile: Codable, Hashable, Sendable {
    public var packagePath: String
    public var adapter: String
    public var addressType: String
    public var updated: String
    public var journal: UpdateJournal
}

/// ``UpdateJournalStore`` over one JSON file per (device address, package SHA-256) in a state directory
/// (`--state-dir`, else `$XDG_STATE_HOME/bledfu`, else `~/.local/state/bledfu`). Every save writes a temporary file
/// and renames it over the old one (through LinuxIO's syscall wrappers), so a crash leaves either the old or the
/// new journal.
public final class JournalFileStore: UpdateJournalStore, @unchecked Sendable {
    // @unchecked: the stored properties are constants; `lock` serialises the writes.
    public let directory: URL
    /// What `bledfu resume` needs to start again, stored beside each journal.
    public let packagePath: String
    public let adapter: String
    public let addressType: String
    private let lock = NSLock()

    public init(directory: URL, packagePath: String, adapter: String, addressType: String) {
        self.directory = directory
        self.packagePath = packagePath
        self.adapter = adapter
        self.addressType = addressType
    }

    /// The default state directory for this environment.
    public static func defaultDirectory(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("bledfu")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/state/bledfu")
    }

    /// `C0FFEE000001-<sha256>.json`.
    public static func fileName(deviceAddress: String, packageSHA256: String) -> String {
        let address = deviceAddress.uppercased().filter { $0.isHexDigit }
        return "\(address)-\(packageSHA256.lowercased()).json"
    }

    public func url(deviceAddress: String, packageSHA256: String) -> URL {
        directory.appendingPathComponent(Self.fileName(deviceAddress: deviceAddress, packageSHA256: packageSHA256))
    }

    public func load(deviceAddress: String, packageSHA256: String) async throws(JournalError) -> UpdateJournal? {
        try loadFile(url(deviceAddress: deviceAddress, packageSHA256: packageSHA256))?.journal
    }

    public func save(_ journal: UpdateJournal) async throws(JournalError) {
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
                    throw JournalError(.unwritable, "cannot write \(target.path): \(error)", cause: error)
                }
            }
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError(.unwritable, "cannot write \(target.path): \(error.localizedDescription)", cause: error)
        }
    }

    public func remove(deviceAddress: String, packageSHA256: String) async throws(JournalError) {
        let target = url(deviceAddress: deviceAddress, packageSHA256: packageSHA256)
        guard FileManager.default.fileExists(atPath: target.path) else { return }
        do {
            try FileManager.default.removeItem(at: target)
        } catch {
            throw JournalError(.unwritable, "cannot remove \(target.path): \(error.localizedDescription)", cause: error)
        }
    }

    /// Reads one journal file; nil when it does not exist.
    public func loadFile(_ url: URL) throws(JournalError) -> JournalFile? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try JSONDecoder().decode(JournalFile.self, from: Data(contentsOf: url))
        } catch {
            throw JournalError(.unreadable, "\(url.path) is not a bledfu journal: \(error.localizedDescription)", cause: error)
        }
    }

    /// Every journal in `directory`, newest first (for `bledfu resume`).
    public static func all(in directory: URL) -> [(url: URL, file: JournalFile)] {
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
