import DFUCore

/// A package as an update will send it, known before anything connects (`batch` checks its plan's packages with
/// it): the family that reads it, its parts in sending order, the application version it installs.
public struct UpdatePlan: Sendable, Hashable {
    /// One part, as the family sends it.
    public struct Part: Sendable, Hashable {
        /// For people: "application", "softdevice+bootloader", "image 0".
        public var name: String
        /// Image bytes the part uploads.
        public var bytes: Int
    }

    public var family: DFUFamilyID
    public var parts: [Part]
    /// Non-fatal findings about the package (the update reports them as warnings).
    public var warnings: [String]
    /// The application version the package installs, when the family has such a number
    /// (``FamilyPlan/targetVersion``).
    public var targetVersion: UInt32?

    /// Image bytes over all parts.
    public var totalBytes: Int { parts.reduce(0) { $0 + $1.bytes } }

    init<P: UpdatePart>(_ plan: FamilyPlan<P>) {
        family = plan.family
        parts = plan.parts.map { Part(name: $0.name, bytes: $0.byteCount) }
        warnings = plan.warnings
        targetVersion = plan.targetVersion
    }
}

extension Updater {
    /// Plans `package` as ``start(_:)`` does before it connects: with the family `family`, or with every family of
    /// `families` in order (nil: `--family auto`), each reading the package (its keys: `options.verificationKeys`)
    /// and checking the options it owns (`options.pacing`, `options.settings`). Throws what the update would:
    /// ``DFUError/Code/unknownFamily``, ``DFUError/Code/invalidOption``, ``DFUError/Code/invalidPackage`` (with the
    /// package error as its cause).
    public static func plan(
        _ package: PackageSource, family: DFUFamilyID? = nil, options: UpdateOptions = UpdateOptions(),
        families: [any DFUFamily] = DefaultFamilies.all
    ) throws(DFUError) -> UpdatePlan {
        let sessions = try sessions(package, family: family, options: options, families: families)
        guard let plan = sessions.lazy.compactMap(\.plannedSummary).first else {
            throw DFUError(.invalidPackage, "no family planned \(package.fileName)")
        }
        return plan
    }

    /// Every candidate family with its plan of the package (or why it has none). Throws when no family can plan
    /// it: the most telling error (a malformed package or a refused option before "another family's package").
    static func sessions(
        _ package: PackageSource, family wanted: DFUFamilyID?, options: UpdateOptions, families all: [any DFUFamily]
    ) throws(DFUError) -> [any FamilySession] {
        var families = all
        if let wanted {
            families = families.filter { $0.id == wanted }
            guard !families.isEmpty else {
                let known = all.map(\.id.rawValue).joined(separator: ", ")
                throw DFUError(.unknownFamily, "no family '\(wanted)' is registered (available: \(known))")
            }
        }
        let sessions = families.map { session($0, package: package, options: options) }
        let planned = sessions.filter { $0.planError == nil }
        guard !planned.isEmpty else {
            let errors = sessions.compactMap(\.planError)
            // The package's own family refused it (broken, unverified) or refused an option (`--mode`, a setting).
            if let invalid = errors.first(where: { $0.code == .invalidPackage || $0.code == .invalidOption }) { throw invalid }
            // A family forced by `--family` said "not mine": another family's package (DFUFamily.plan's contract).
            if wanted != nil, errors.count == 1 { throw errors[0] }
            // Every family says "not mine": a package none of them reads is an invalid package.
            throw DFUError(
                .invalidPackage, errors.map(\.message).joined(separator: "; "), cause: errors.count == 1 ? errors[0] : nil)
        }
        return sessions
    }

    static func session<F: DFUFamily>(_ family: F, package: PackageSource, options: UpdateOptions) -> any FamilySession {
        TypedFamilySession(family: family, package: package, options: options)
    }
}
