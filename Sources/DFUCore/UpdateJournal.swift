import BLECore

/// What a device holds of a package, kept across connections and runs: which family, which part, and the
/// family's own resume state for that part. Saved at every safe point the family reports (Secure DFU: each
/// executed object), removed when the update completes.
///
///     {"deviceAddress":"C0:FF:EE:00:00:01","packageSHA256":"9f86…","family":"secure","partIndex":0,
///      "confirmedBytes":4096,"resume":{"executed":[{"index":0,"offset":4096,"crc":305419896}]}}
///
/// Journals written before families existed (`{"deviceAddress",…,"partIndex",…,"executed":[…]}`) read as Secure DFU
/// journals with that `executed` list as their resume state.
public struct UpdateJournal: Codable, Hashable, Sendable {
    public var deviceAddress: String
    /// Hex SHA-256 of the package file: a journal never applies to another package.
    public var packageSHA256: String
    public var family: DFUFamilyID
    /// The part being sent (0-based, in the plan's order).
    public var partIndex: Int
    /// Bytes of that part the device holds for sure (what a resume will not send again).
    public var confirmedBytes: Int
    /// The family's resume state for ``partIndex`` (nil: start the part from its beginning).
    public var resume: ResumePayload?

    public init(
        deviceAddress: String, packageSHA256: String, family: DFUFamilyID, partIndex: Int = 0, confirmedBytes: Int = 0,
        resume: ResumePayload? = nil
    ) {
        self.deviceAddress = deviceAddress
        self.packageSHA256 = packageSHA256
        self.family = family
        self.partIndex = partIndex
        self.confirmedBytes = confirmedBytes
        self.resume = resume
    }

    enum CodingKeys: String, CodingKey {
        case deviceAddress, packageSHA256, family, partIndex, confirmedBytes, resume
        /// Secure DFU journals before families (the resume state at top level).
        case executed
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        deviceAddress = try container.decode(String.self, forKey: .deviceAddress)
        packageSHA256 = try container.decode(String.self, forKey: .packageSHA256)
        partIndex = try container.decodeIfPresent(Int.self, forKey: .partIndex) ?? 0
        confirmedBytes = try container.decodeIfPresent(Int.self, forKey: .confirmedBytes) ?? 0
        if let family = try container.decodeIfPresent(DFUFamilyID.self, forKey: .family) {
            self.family = family
            resume = try container.decodeIfPresent(ResumePayload.self, forKey: .resume)
        } else {
            family = .secure
            let executed = try container.decodeIfPresent(ResumePayload.self, forKey: .executed)
            resume = executed.map { .object(["executed": $0]) }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(deviceAddress, forKey: .deviceAddress)
        try container.encode(packageSHA256, forKey: .packageSHA256)
        try container.encode(family, forKey: .family)
        try container.encode(partIndex, forKey: .partIndex)
        try container.encode(confirmedBytes, forKey: .confirmedBytes)
        try container.encodeIfPresent(resume, forKey: .resume)
    }
}

/// A journal could not be read or written.
public struct JournalError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The stored journal does not decode.
        public static let unreadable = Code(rawValue: "journal-unreadable")
        /// The store could not write or remove it.
        public static let unwritable = Code(rawValue: "journal-unwritable")
        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String
    public var cause: (any Error)?

    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { "journal: \(message)" }
}

/// Where journals live, one per (device address, package SHA-256). The updater loads it before the first part,
/// saves it at every safe point and removes it when the update completes. This module makes no syscalls:
/// BledfuKit has a file store, tests use ``InMemoryUpdateJournalStore``.
public protocol UpdateJournalStore: Sendable {
    func load(deviceAddress: String, packageSHA256: String) async throws(JournalError) -> UpdateJournal?
    func save(_ journal: UpdateJournal) async throws(JournalError)
    func remove(deviceAddress: String, packageSHA256: String) async throws(JournalError)
}

/// A journal store in memory (tests, and updates that do not persist).
public actor InMemoryUpdateJournalStore: UpdateJournalStore {
    private var journals: [String: UpdateJournal] = [:]

    public init() {}

    private static func key(_ address: String, _ sha: String) -> String { address.uppercased() + "|" + sha.lowercased() }

    public func load(deviceAddress: String, packageSHA256: String) async throws(JournalError) -> UpdateJournal? {
        journals[Self.key(deviceAddress, packageSHA256)]
    }

    public func save(_ journal: UpdateJournal) async throws(JournalError) {
        journals[Self.key(journal.deviceAddress, journal.packageSHA256)] = journal
    }

    public func remove(deviceAddress: String, packageSHA256: String) async throws(JournalError) {
        journals[Self.key(deviceAddress, packageSHA256)] = nil
    }

    /// Every journal held (for tests).
    public var all: [UpdateJournal] { Array(journals.values) }
}
