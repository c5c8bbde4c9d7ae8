/// What a family makes of a device (and, given a plan, of the package for it) before anything is sent: the
/// versions the device tells in its current mode, the package's requirements the device's answers let the family
/// check, the ones they refuse, and the ones it cannot check (the device does not tell them). The updater refuses a
/// package with ``refusals`` before the jump (``DFUError/Code/deviceMismatch``), so that a device is never left in
/// its bootloader by a package its bootloader would refuse; `bledfu device info` prints all of it.
public struct PackageAssessment: Sendable, Hashable, Codable {
    /// What the device tells beyond its Device Information ("image 0 slot 0: 1.0.0 active confirmed",
    /// "MCUboot refuses downgrades").
    public var facts: [String]
    /// Requirements checked and met ("hardware version 52 (Hardware Revision \"52\")").
    public var checked: [String]
    /// Requirements the device's answers show it would refuse, each one line naming both sides.
    public var refusals: [String]
    /// Requirements nobody could check before the jump ("the signing key: the device does not tell which key its
    /// bootloader trusts").
    public var notChecked: [String]
    /// What an update with the package would do ("application 1 → 2"), when the family can say.
    public var effect: String?
    /// The updater the device shows is its application (MCUmgr SMP; InfiniTime's Legacy DFU service): there is no
    /// bootloader to leave.
    public var updaterIsApplication = false

    public init(
        facts: [String] = [], checked: [String] = [], refusals: [String] = [], notChecked: [String] = [],
        effect: String? = nil
    ) {
        self.facts = facts
        self.checked = checked
        self.refusals = refusals
        self.notChecked = notChecked
        self.effect = effect
    }

    /// Nothing to say.
    public var isEmpty: Bool { facts.isEmpty && checked.isEmpty && refusals.isEmpty && notChecked.isEmpty && effect == nil }

    /// Both assessments, one after the other.
    public func merged(with other: PackageAssessment) -> PackageAssessment {
        var merged = PackageAssessment(
            facts: facts + other.facts, checked: checked + other.checked, refusals: refusals + other.refusals,
            notChecked: notChecked + other.notChecked, effect: [effect, other.effect].compactMap { $0 }.joined(separator: "; ")
                .nilIfEmpty)
        merged.updaterIsApplication = updaterIsApplication || other.updaterIsApplication
        return merged
    }
}

/// What ``DFUFamily/leaveUpdater(on:context:)`` did.
public enum UpdaterExit: Sendable, Hashable {
    /// The updater was asked to reset into the application (Secure DFU Abort `0C`, Legacy DFU Reset `06`).
    case requested
    /// The updater is the application itself (MCUmgr SMP): there is nothing to leave.
    case isApplication
    /// This updater has no way out the host can ask for (the reason, for people).
    case unsupported(String)
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
