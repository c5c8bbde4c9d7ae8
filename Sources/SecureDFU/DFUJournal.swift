import BLECore
/// What a device holds of a package, kept across connections and runs so that a resume can tell executed data from
/// data that is merely present (Create Data cannot repair executed data; see ``DFUPlanning/dataResumeDecision``).
///
/// Stored as JSON by the CLI (`Codable`), updated after every executed object:
///
///     {"deviceAddress":"C0:FF:EE:00:00:01","packageSHA256":"9f86…","partIndex":0,
///      "executed":[{"index":0,"offset":4096,"crc":305419896}]}
public struct DFUJournal: Codable, Hashable, Sendable {
    public var deviceAddress: String
    /// Hex SHA-256 of the package file: a journal never applies to another package.
    public var packageSHA256: String
    /// The part being sent; objects of earlier parts are dropped when it changes.
    public var partIndex: Int
    public var executed: [DFUExecutedObject]

    public init(deviceAddress: String, packageSHA256: String, partIndex: Int = 0, executed: [DFUExecutedObject] = []) {
        self.deviceAddress = deviceAddress
        self.packageSHA256 = packageSHA256
        self.partIndex = partIndex
        self.executed = executed
    }

    /// End of the executed data of ``partIndex``.
    public var executedOffset: Int? { executed.map(\.offset).max() }

    /// Records an executed object of `part`.
    public mutating func record(_ object: DFUExecutedObject, part: Int) {
        if part != partIndex {
            partIndex = part
            executed = []
        }
        executed.removeAll { $0.index == object.index }
        executed.append(object)
        executed.sort { $0.index < $1.index }
    }
}

/// A journal store failed (the CLI's file store reports errno text here).
public struct JournalStoreError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The store could not read, write or remove a journal.
        public static let failed = Code(rawValue: "journal-store-failed")
        public var description: String { rawValue }
    }

    public var code: Code
    public var reason: String

    public init(_ reason: String, code: Code = .failed) {
        self.code = code
        self.reason = reason
    }

    public var message: String { reason }
    public var description: String { "journal: \(reason)" }
}

/// Where journals live. This module makes no syscalls: the CLI implements a file store.
public protocol JournalStore: Sendable {
    func load(deviceAddress: String, packageSHA256: String) async throws(JournalStoreError) -> DFUJournal?
    func save(_ journal: DFUJournal) async throws(JournalStoreError)
    func remove(deviceAddress: String, packageSHA256: String) async throws(JournalStoreError)
}

/// A journal store in memory (tests, and runs that do not persist).
public actor InMemoryJournalStore: JournalStore {
    private var journals: [String: DFUJournal] = [:]

    public init() {}

    private static func key(_ address: String, _ sha: String) -> String {
        address.uppercased() + "|" + sha.lowercased()
    }

    public func load(deviceAddress: String, packageSHA256: String) async throws(JournalStoreError) -> DFUJournal? {
        journals[Self.key(deviceAddress, packageSHA256)]
    }

    public func save(_ journal: DFUJournal) async throws(JournalStoreError) {
        journals[Self.key(journal.deviceAddress, journal.packageSHA256)] = journal
    }

    public func remove(deviceAddress: String, packageSHA256: String) async throws(JournalStoreError) {
        journals[Self.key(deviceAddress, packageSHA256)] = nil
    }
}
