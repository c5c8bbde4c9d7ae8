/// Names of well-known SoftDevice firmware IDs (FWIDs) as used in `sd_req`, from the `--sd-req` help text of
/// nrfutil 6.1.7 (`pkg generate --help`). Unknown IDs print as hex.
public enum SoftDeviceNames {
    public static let table: [UInt32: String] = [
        0x0000: "no SoftDevice",
        0xFFFE: "any (debug)",
        // S110 v8.0.0: the FWID in the Legacy SDK 8/9 packages built for s110_v8_0_0 (corpus).
        0x0064: "S110 v8.0.0 (nrf51)",
        0x00A7: "S112 v6.0.0 (nrf52)",
        0x00B0: "S112 v6.1.0 (nrf52)",
        0x00B8: "S112 v6.1.1 (nrf52)",
        0x00C4: "S112 v7.0.0 (nrf52)",
        0x00CD: "S112 v7.0.1 (nrf52)",
        0x0103: "S112 v7.2.0 (nrf52)",
        0x0126: "S112 v7.3.0 (nrf52)",
        0x00C3: "S113 v7.0.0 (nrf52)",
        0x00CC: "S113 v7.0.1 (nrf52)",
        0x0102: "S113 v7.2.0 (nrf52)",
        0x0125: "S113 v7.3.0 (nrf52)",
        0x00EA: "S122 v8.0.0 (nrf52)",
        0x0112: "S122 v8.1.1 (nrf52)",
        0x0067: "S130 v1.0.0 (nrf51)",
        0x0080: "S130 v2.0.0 (nrf51)",
        0x0087: "S130 v2.0.1 (nrf51)",
        0x0081: "S132 v2.0.0 (nrf52)",
        0x0088: "S132 v2.0.1 (nrf52)",
        0x008C: "S132 v3.0.0 (nrf52)",
        0x0091: "S132 v3.1.0 (nrf52)",
        0x0095: "S132 v4.0.0 (nrf52)",
        0x0098: "S132 v4.0.2 (nrf52)",
        0x0099: "S132 v4.0.3 (nrf52)",
        0x009E: "S132 v4.0.4 (nrf52)",
        0x009F: "S132 v4.0.5 (nrf52)",
        0x009D: "S132 v5.0.0 (nrf52)",
        0x00A5: "S132 v5.1.0 (nrf52)",
        0x00A8: "S132 v6.0.0 (nrf52)",
        0x00AF: "S132 v6.1.0 (nrf52)",
        0x00B7: "S132 v6.1.1 (nrf52)",
        0x00C2: "S132 v7.0.0 (nrf52)",
        0x00CB: "S132 v7.0.1 (nrf52)",
        0x0101: "S132 v7.2.0 (nrf52)",
        0x0124: "S132 v7.3.0 (nrf52)",
        0x00A9: "S140 v6.0.0 (nrf52)",
        0x00AE: "S140 v6.1.0 (nrf52)",
        0x00B6: "S140 v6.1.1 (nrf52)",
        0x00C1: "S140 v7.0.0 (nrf52)",
        0x00CA: "S140 v7.0.1 (nrf52)",
        0x0100: "S140 v7.2.0 (nrf52)",
        0x0123: "S140 v7.3.0 (nrf52)",
        0x00BC: "S212 v6.1.1 (nrf52)",
        0x00BA: "S332 v6.1.1 (nrf52)",
        0x00B9: "S340 v6.1.1 (nrf52)",
    ]

    /// "0x00B7 (S132 v6.1.1)" or "0x1234".
    public static func describe(_ id: UInt32) -> String {
        let hex = "0x" + String(repeating: "0", count: max(0, 4 - String(id, radix: 16).count))
            + String(id, radix: 16, uppercase: true)
        if let name = table[id] { return "\(hex) (\(name))" }
        return hex
    }
}
