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
}
