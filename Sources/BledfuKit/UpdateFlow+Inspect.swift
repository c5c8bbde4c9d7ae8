import BLECore
import DFUCore
import GATT

/// ``Updater/inspect(_:)`` and ``Updater/leaveUpdater(_:)`` on the update's flow: the same connecting, the same
/// families' `detect`, the same clock.
extension UpdateFlow {
    /// Connects, detects, reads what the device tells and assesses the package (if any). Returns the open link (the
    /// caller closes it) and the family session that recognised the device.
    func inspect(_ inspection: InspectionRequest) async throws(DFUError)
        -> (DeviceInspection, DFULink, (any FamilySession)?)
    {
        let sessions = try inspection.package == nil ? candidateSessions() : planAll()
        let peer = try await resolveTarget()
        let link = try await openForInspection(peer, sessions: sessions, applicationOnly: inspection.applicationOnly)
        do {
            let services = try await Self.services(on: link)
            var result = DeviceInspection(address: link.peer.address.description, package: inspection.package?.fileName)
            var found: (any FamilySession)?
            for session in sessions {
                let mode: DetectedMode
                switch try await session.probe(services, on: link, context: context) {
                case .notMine: continue
                case .updater: mode = .updater
                case .application: mode = .application
                case .applicationWithoutEntry(let reason):
                    mode = .applicationWithoutEntry
                    result.note = reason
                }
                result.family = session.id
                result.familyName = session.displayName
                result.mode = mode
                found = session
                break
            }
            result.information = try await DeviceInformation.read(services, on: link)
            if let session = found, let mode = result.mode {
                let withPlan = inspection.package != nil
                result.assessment = try await session.assess(
                    device: result.information, mode: mode, services: services, on: link, context: context,
                    withPlan: withPlan)
                if withPlan, let planError = session.planError {
                    result.assessment.refusals.append("the device speaks \(session.displayName), but \(planError.message)")
                }
            } else {
                let names = sessions.map(\.displayName).joined(separator: ", ")
                result.note = "the device offers no DFU service of \(names)"
            }
            return (result, link, found)
        } catch {
            await link.close()
            throw error
        }
    }

    /// The families to try, without a package (``planAll()`` with one).
    func candidateSessions() throws(DFUError) -> [any FamilySession] {
        var families = updater.families
        if let wanted = request.family {
            families = families.filter { $0.id == wanted }
            guard !families.isEmpty else {
                let known = updater.families.map(\.id.rawValue).joined(separator: ", ")
                throw DFUError(.unknownFamily, "no family '\(wanted)' is registered (available: \(known))")
            }
        }
        return families.map { Updater.session($0, package: request.package, options: request.options) }
    }

    /// The device at its address; when it is not there, where it will be (`applicationOnly`: it reboots, so wait for
    /// its advertising) or where a family's updater would be for it.
    func openForInspection(_ peer: PeerAddress, sessions: [any FamilySession], applicationOnly: Bool)
        async throws(DFUError) -> DFULink
    {
        do {
            return try await connect(peer)
        } catch where Self.isNotThere(error) && request.target.isAddress {
            var location = DeviceLocation(peer)
            if !applicationOnly {
                for session in sessions {
                    if let elsewhere = session.updaterLocation(forApplicationAt: peer, options: request.options) {
                        location = location.merged(with: elsewhere)
                    }
                }
            }
            let original = error
            do {
                return try await findAndConnect(location, notFound: .notFound).link
            } catch where error.code == .notFound {
                throw original
            }
        }
    }

    func leaveUpdater(_ inspection: InspectionRequest) async throws(DFUError) -> UpdaterExitReport {
        let (before, link, found) = try await inspect(inspection)
        guard let session = found, !before.runsApplication else {
            await link.close()
            let what = before.familyName.map { "its \($0) updater" } ?? "a DFU updater"
            let message =
                before.assessment.updaterIsApplication
                ? "the device runs its application (its updater is the application itself): nothing to do"
                : before.mode == nil ? "the device is not in \(what): nothing to do"
                : "the device runs its application (\(before.address)): nothing to do"
            return UpdaterExitReport(before: before, backInApplication: before.mode != nil, message: message)
        }
        let updaterPeer = link.peer
        let exit = await session.leaveUpdater(on: link, context: context)
        await link.close()
        switch exit {
        case .isApplication:
            return UpdaterExitReport(before: before, backInApplication: true, message: "the device still runs its application")
        case .unsupported(let why):
            throw DFUError(.remoteRefusal, "the device stays in its bootloader at \(updaterPeer.address): \(why)", family: session.id)
        case .requested:
            break
        }
        // The application is at the address given, or (given the bootloader's address) one below it.
        var application = DeviceLocation(updaterPeer)
        if case .address(let given) = request.target, given.address != updaterPeer.address {
            application = DeviceLocation(given)
        } else {
            application.addresses.append(updaterPeer.address.nordicApplicationAddress)
        }
        switch await lookAfterLeaving(updater: DeviceLocation(updaterPeer), application: application, session: session) {
        case .application(let peer):
            return UpdaterExitReport(
                before: before, backInApplication: true, message: "the device is back in its application (\(peer.address))")
        case .updater(let peer):
            throw DFUError(
                .remoteRefusal,
                "the device came back in its bootloader at \(peer.address): it has no valid application to return to"
                    + " (flash a complete package)", family: session.id, location: DeviceLocation(peer))
        case .missing(let why):
            throw DFUError(
                .notFound, "the device was asked to leave its bootloader but \(why)", family: session.id,
                location: application)
        }
    }
}
