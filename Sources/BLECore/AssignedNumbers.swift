import BLECore

/// Names of standard Bluetooth UUIDs (the Bluetooth SIG's Assigned Numbers, shipped as
/// Sources/BLECore/Data/assigned-numbers.tsv and carried in the binary by tools/generate-embedded), for `scan`
/// and `gatt` output.
public enum AssignedNumbers {
    public struct Entry: Sendable, Equatable {
        public var kind: String
        public var name: String
    }

    /// The table, parsed once: UUID → kind and name. A malformed line is skipped (InstalledBinaryTests checks that
    /// every line of the shipped file parses).
    public static let table: [BluetoothUUID: Entry] = parse(AssignedNumbersData.tsv).entries

    /// Parses the TSV text: the entries and the lines (1-based) that do not parse.
    public static func parse(_ text: String) -> (entries: [BluetoothUUID: Entry], bad: [Int]) {
        var entries: [BluetoothUUID: Entry] = [:]
        var bad: [Int] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.isEmpty || line.hasPrefix("#") { continue }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 3, let uuid = BluetoothUUID(fields[0]), !fields[2].isEmpty else {
                bad.append(index + 1)
                continue
            }
            entries[uuid] = Entry(kind: fields[1], name: fields[2])
        }
        return (entries, bad)
    }

    /// "Battery Level", or nil for a UUID without an assigned name.
    public static func name(of uuid: BluetoothUUID) -> String? { table[uuid]?.name }

    /// `2A19 "Battery Level"`, or the UUID alone.
    public static func label(_ uuid: BluetoothUUID) -> String {
        name(of: uuid).map { "\(uuid) \"\($0)\"" } ?? uuid.description
    }
}
