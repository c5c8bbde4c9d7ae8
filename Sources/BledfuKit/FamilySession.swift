import BLECore
import DFUCore
import GATT
import Synchronization

/// The jump of a detected application, with the family's entry captured.
typealias FamilySessionJump = @Sendable (DFULink, UpdateContext) async throws(DFUError) -> DeviceLocation

/// What a family's detection means to the updater.
enum FamilyProbe: Sendable {
    case notMine
    case updater
    case application(bonded: Bool, FamilySessionJump)
    case applicationWithoutEntry(String)
}

/// A family with its plan of the package, behind one non-generic interface: the updater holds a list of these
/// (``UpdateFlow/planAll()``) and each does its family's typed work (``TypedFamilySession``).
protocol FamilySession: Sendable {
    var id: DFUFamilyID { get }
    var displayName: String { get }
    /// Why the family cannot take the package (nil: it planned it).
    var planError: DFUError? { get }
    /// The plan, for ``Updater/plan(_:family:options:families:)`` (nil: the family did not plan it).
    var plannedSummary: UpdatePlan? { get }
    /// Emits the plan's warnings (once).
    func reportPlan(_ flow: UpdateFlow)
    func probe(_ services: [GATTService], on link: DFULink, context: UpdateContext) async throws(DFUError) -> FamilyProbe
    func updaterLocation(forApplicationAt peer: PeerAddress, options: UpdateOptions) -> DeviceLocation?
    /// The family's ``DFUFamily/assess(_:device:mode:on:context:)``, with the plan when `withPlan` and there is one.
    func assess(
        device: DeviceInformation, mode: DetectedMode, services: [GATTService], on link: DFULink, context: UpdateContext,
        withPlan: Bool
    ) async throws(DFUError) -> PackageAssessment
    /// The family's ``DFUFamily/leaveUpdater(on:context:)``.
    func leaveUpdater(on link: DFULink, context: UpdateContext) async -> UpdaterExit
    /// Every part from the journal's position, then the family's finish. Returns the parts' summaries and the
    /// finish's, joined by "; ".
    func runParts(flow: UpdateFlow, link: DFULink, location: DeviceLocation, journal: UpdateJournal?)
        async throws(DFUError) -> String?
}

final class TypedFamilySession<F: DFUFamily>: FamilySession {
    let family: F
    let plan: Result<FamilyPlan<F.Part>, DFUError>
    private let reported = Mutex(false)

    init(family: F, package: PackageSource, options: UpdateOptions) {
        self.family = family
        do {
            plan = .success(try family.plan(package, options: options))
        } catch {
            plan = .failure(error.from(family.id))
        }
    }

    var id: DFUFamilyID { family.id }
    var displayName: String { family.displayName }
    var planError: DFUError? { if case .failure(let error) = plan { error } else { nil } }
    var plannedSummary: UpdatePlan? { if case .success(let plan) = plan { UpdatePlan(plan) } else { nil } }

    func reportPlan(_ flow: UpdateFlow) {
        guard case .success(let plan) = plan, !reported.withLock({ $0 }) else { return }
        reported.withLock { $0 = true }
        for warning in plan.warnings { flow.emit(.warning(warning)) }
    }

    func probe(_ services: [GATTService], on link: DFULink, context: UpdateContext) async throws(DFUError) -> FamilyProbe {
        let detection: Detection<F.Entry>?
        do {
            detection = try await family.detect(services, on: link, context: context)
        } catch {
            throw error.from(family.id)
        }
        switch detection {
        case nil: return .notMine
        case .updater?: return .updater
        case .applicationWithoutEntry(let reason)?: return .applicationWithoutEntry(reason)
        case .application(let entry, _, let bonded)?:
            let family = self.family
            return .application(bonded: bonded) { link, context throws(DFUError) in
                do throws(DFUError) {
                    return try await family.enterUpdater(entry, on: link, context: context)
                } catch {
                    throw error.from(family.id)
                }
            }
        }
    }

    func updaterLocation(forApplicationAt peer: PeerAddress, options: UpdateOptions) -> DeviceLocation? {
        family.updaterLocation(forApplicationAt: peer, options: options)
    }

    func assess(
        device: DeviceInformation, mode: DetectedMode, services: [GATTService], on link: DFULink, context: UpdateContext,
        withPlan: Bool
    ) async throws(DFUError) -> PackageAssessment {
        var plan: FamilyPlan<F.Part>?
        if withPlan, case .success(let planned) = self.plan { plan = planned }
        do {
            return try await family.assess(plan, device: device, mode: mode, services: services, on: link, context: context)
        } catch {
            throw error.from(family.id)
        }
    }

    func leaveUpdater(on link: DFULink, context: UpdateContext) async -> UpdaterExit {
        await family.leaveUpdater(on: link, context: context)
    }

    func runParts(flow: UpdateFlow, link: DFULink, location: DeviceLocation, journal: UpdateJournal?)
        async throws(DFUError) -> String?
    {
        guard case .success(let plan) = plan else { throw planError ?? DFUError(.invalidPackage, "no plan") }
        var loop = await PartLoop(
            session: self, plan: plan, flow: flow, link: link, location: location, journal: journal)
        return try await loop.run()
    }
}
