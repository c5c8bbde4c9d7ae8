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
