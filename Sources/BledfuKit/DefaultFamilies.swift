import BLECore
import DFUCore
import LegacyDFU
import MCUmgr
import SecureDFU

/// The families an ``Updater`` knows unless told otherwise, in the order it asks them about a device. A new family
/// is one more line here (docs/architecture.md, "Adding a family").
public enum DefaultFamilies {
    public static var all: [any DFUFamily] {
        [SecureDFUFamily(), LegacyDFUFamily(), SMPFamily()]
    }

    /// The services that name a DFU device of one of `families` (``DFUFamily/advertisedServices``).
    public static func services(of families: [any DFUFamily] = all) -> Set<BluetoothUUID> {
        Set(families.flatMap(\.advertisedServices))
    }

    /// The settings that command-line options with these values set, through the families' ``DFUFamily/
    /// optionSettings`` (`["confirm": "upload-only"]` → `["smp.confirm": "upload-only"]`); options no family maps
    /// and nil values are left out.
    public static func settings(forOptions options: [String: String?], among families: [any DFUFamily] = all)
        -> [String: String]
    {
        var settings: [String: String] = [:]
        for family in families {
            for (option, key) in family.optionSettings {
                if let value = options[option] ?? nil { settings[key] = value }
            }
        }
        return settings
    }

    /// The first of `families` that calls an advertisement with these services and this name its own
    /// (``DFUFamily/advertises(services:name:)``); nil when none does.
    public static func family(
        advertising services: [BluetoothUUID], name: String? = nil, among families: [any DFUFamily] = all
    ) -> DFUFamilyID? {
        families.first { $0.advertises(services: services, name: name) }?.id
    }
}
