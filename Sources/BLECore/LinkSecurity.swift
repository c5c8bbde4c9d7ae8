/// The security of an LE link, numbered as BlueZ's `BT_SECURITY` socket option numbers its levels
/// (`include/net/bluetooth/bluetooth.h`), which follow LE Security Mode 1 (Core v5.4 Vol 3 Part C §10.2.1).
public struct LinkSecurityLevel: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Mode 1 level 1: no encryption (`BT_SECURITY_LOW`). Every link starts here.
    public static let low = LinkSecurityLevel(rawValue: 1)
    /// Level 2: encrypted with an unauthenticated key, Just Works or a stored bond (`BT_SECURITY_MEDIUM`). What the
    /// nRF5 SDK calls `SEC_JUST_WORKS` and `sm = 1, lv = 2`.
    public static let medium = LinkSecurityLevel(rawValue: 2)
    /// Level 3: encrypted with an authenticated (MITM-protected) key (`BT_SECURITY_HIGH`).
    public static let high = LinkSecurityLevel(rawValue: 3)
    /// Level 4: LE Secure Connections with an authenticated 128-bit key (`BT_SECURITY_FIPS`).
    public static let fips = LinkSecurityLevel(rawValue: 4)

    public static func < (lhs: LinkSecurityLevel, rhs: LinkSecurityLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Whether the link is encrypted at this level.
    public var isEncrypted: Bool { self >= .medium }

    public var description: String {
        switch self {
        case .low: "low (not encrypted)"
        case .medium: "medium (encrypted)"
        case .high: "high (encrypted, authenticated)"
        case .fips: "fips (LE Secure Connections)"
        default: "level \(rawValue)"
        }
    }
}

/// The ATT errors with which a server refuses an access that needs more link security (Core v5.4 Vol 3 Part F
/// §3.4.1.1): Insufficient Authentication (0x05: the SoftDevice's answer on an unencrypted link), Insufficient
/// Encryption (0x0F), Insufficient Encryption Key Size (0x0C).
public enum LinkSecurityErrors {
    public static let codes: Set<UInt8> = [0x05, 0x0C, 0x0F]
}
