import BLECore
import DFUCore
import GATT

/// Never strand a device: check the package against what the device tells before the jump, and after a refusal in
/// the updater bring the device back to its application (where the updater allows it) and say where it is.
extension UpdateFlow {
    /// Before the jump (or before an updater that is the application takes anything): the family compares the
    /// package with what the device tells (``PackageAssessment``). A package the device would refuse ends the update
    /// here with ``DFUError/Code/deviceMismatch``; what could not be checked is said in a message.
    func precheck(_ session: any FamilySession, mode: DetectedMode, services: [GATTService], on link: DFULink)
        async throws(DFUError)
    {
        // A bootloader tells nothing of the application; it checks the package itself.
        let device = mode == .updater ? DeviceInformation() : try await DeviceInformation.read(services, on: link)
        let assessment = try await session.assess(
            device: device, mode: mode, services: services, on: link, context: context, withPlan: true)
        let when = mode == .application ? "before the jump" : "before sending"
        guard assessment.refusals.isEmpty else {
            let still = mode == .application ? "the device still runs its application" : "the device is unchanged"
            throw DFUError(
                .deviceMismatch,
                "the device would refuse \(request.package.fileName): \(assessment.refusals.joined(separator: "; "));"
                    + " nothing was sent, \(still)",
                family: session.id, location: DeviceLocation(link.peer))
        }
        if !assessment.checked.isEmpty {
            emit(.message("checked \(when): \(assessment.checked.joined(separator: "; "))"))
        }
        if !assessment.notChecked.isEmpty {
            emit(.message("not checked \(when): \(assessment.notChecked.joined(separator: "; "))"))
        }
    }

    /// After the updater refused a part: asks it to reset into the application (Secure DFU Abort, Legacy DFU
    /// Reset), looks where the device went, and returns the error with that said at its end and the device's
    /// location. Closes `link`.
    func leaveUpdater(
        after error: DFUError, link: DFULink, session: any FamilySession, application: DeviceLocation
    ) async -> DFUError {
        let exit = await session.leaveUpdater(on: link, context: context)
        await link.close()
        let updater = DeviceLocation(link.peer)
        var result = error
        switch exit {
        case .isApplication:
            result.message += "; the device still runs its application"
            result.location = application
        case .unsupported(let why):
            // No way out the host can ask for: the bootloader leaves on its inactivity timeout or a power cycle.
            result.message += "; the device waits in its bootloader at \(link.peer.address) (\(why))"
            result.location = updater
        case .requested:
            switch await lookAfterLeaving(updater: updater, application: application, session: session) {
            case .application(let peer):
                result.message += "; the device is back in its application"
                result.location = DeviceLocation(peer)
            case .updater(let peer):
                // Asked to leave, it came back in its bootloader: its application is not valid (a single-bank
                // device erased it at Start; a SoftDevice update invalidated it).
                result.message +=
                    "; the device stays in its bootloader at \(peer.address): it has no valid application to return to"
                    + " (flash a complete package)"
                result.location = DeviceLocation(peer)
            case .missing(let why):
                result.message += "; the device was asked to leave its bootloader but " + why
                result.location = application.merged(with: updater)
            }
        }
        return result
    }

    /// Where a device went after it was asked to leave its updater.
    enum AfterLeaving: Sendable, Hashable {
        case application(PeerAddress)
        case updater(PeerAddress)
        /// It did not show up (why, for people).
        case missing(String)
    }

    /// Where the device is after it was asked to leave its updater: back in its application, or still (again) in its
    /// updater. Looks for up to the scan timeout on the updater's clock.
    func lookAfterLeaving(updater: DeviceLocation, application: DeviceLocation, session: any FamilySession) async
        -> AfterLeaving
    {
        // The application, the updater where it was, and where the updater comes back after a reset (Nordic
        // bootloaders without peer data: address + 1).
        var location = application.merged(with: updater)
        if let address = application.addresses.first,
            let reset = session.updaterLocation(
                forApplicationAt: PeerAddress(address, type: application.addressType), options: request.options)
        {
            location = location.merged(with: reset)
        }
        do throws(DFUError) {
            try await pause(request.options.rebootDelay)
            let (link, peer) = try await findAndConnect(location, notFound: .notFound)
            let probe: FamilyProbe
            do throws(DFUError) {
                probe = try await session.probe(try await Self.services(on: link), on: link, context: context)
            } catch {
                await link.close()
                throw error
            }
            await link.close()
            if case .updater = probe { return .updater(peer) }
            return .application(peer)
        } catch {
            return .missing("did not show up within \(Self.seconds(request.scanTimeout)) s (\(error.message))")
        }
    }

    static func services(on link: DFULink) async throws(DFUError) -> [GATTService] {
        do {
            return try await link.gatt.discoverPrimaryServices()
        } catch {
            throw linkError(error, doing: "discovering services")
        }
    }
}
