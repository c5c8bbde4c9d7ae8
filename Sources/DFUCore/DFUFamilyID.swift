/// Which DFU protocol family a device speaks, a package is for, or a journal belongs to.
///
/// An open code space: a family added later (or named in a journal written by a newer version) is a value like any
/// other. The raw value is what `--family` takes and what journals and `--json` events carry.
public struct DFUFamilyID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// Nordic Secure DFU (nRF5 SDK ≥ 12): service FE59, init packet + data objects (secure-dfu-anchors.md).
    public static let secure = DFUFamilyID("secure")
    /// Nordic Legacy DFU (nRF5 SDK ≤ 11, Adafruit, InfiniTime): service 1530 (legacy-dfu.md).
    public static let legacy = DFUFamilyID("legacy")
    /// MCUmgr SMP image upload into MCUboot (Zephyr, nRF Connect SDK): service 8D53DC1D (smp-mcuboot.md).
    public static let smp = DFUFamilyID("smp")

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public static func < (lhs: DFUFamilyID, rhs: DFUFamilyID) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { rawValue }
}
