import Logging
import BLECore
import DFUCore
import GATT

extension UpdateFlow {
    /// After a failed connection, before the next try inside one scan window.
    static let retryPause: Duration = .milliseconds(250)
    /// How often the device may come back in application mode after a jump before the updater gives up.
    static let maximumJumps = 3

    // MARK: Connecting

    /// The device to start with: the address given, or the first device advertising the name.
    func resolveTarget() async throws(DFUError) -> PeerAddress {
        switch request.target {
        case .address(let peer): return peer
        case .name(let name):
            emit(.scanning(name: name))
            do {
                for try await advertisement in updater.adapter.scan(
                    filter: ScanFilter(namePrefix: name), duration: request.scanTimeout)
                {
                    return advertisement.peer
                }
            } catch let error as AdapterError {
                throw DFUError(.connection, error.reason, cause: error)
            } catch {
                throw DFUError(.connection, "scan failed: \(error)", cause: error)
            }
            throw DFUError(
                .connection, "no device named '\(name)…' found within \(Self.seconds(request.scanTimeout)) s",
                cause: AdapterError(.deviceNotFound, "no device named '\(name)'"))
        }
    }

    /// Connects to `peer`, wraps the bearer (captures) and exchanges the MTU.
    func connect(_ peer: PeerAddress) async throws(DFUError) -> DFULink {
        var options = ConnectOptions(timeout: request.connectTimeout)
        options.securityLevel = request.securityLevel
        let bearer: any ATTBearer
        do {
            bearer = try await updater.adapter.connect(to: peer, options: options)
        } catch {
            throw DFUError(.connection, error.reason, cause: error)
        }
        var wrapped = bearer
        if let wrap = updater.bearerWrapper {
            do {
                wrapped = try wrap(bearer)
            } catch {
                await bearer.close()
                throw error
            }
        }
        let att = ATTClient(bearer: wrapped, clock: updater.clock, logger: updater.logger)
        do {
            _ = try await att.exchangeMTU()
        } catch {
            await att.close()
            throw Self.linkError(error, doing: "exchanging the MTU")
        }
        return DFULink(gatt: GATTClient(att: att), peer: peer)
    }

    /// An ATT failure while setting a link up: a connection error (its cause maps to the exit code).
    static func linkError(_ error: ATTClientError, doing what: String) -> DFUError {
        switch error.code {
        case .disconnected, .closed: DFUError(.connection, "the device disconnected while \(what): \(error)", cause: error)
        default: DFUError(.connection, "\(what): \(error)", cause: error)
        }
    }

    /// Scans for the device at `location` (by name or address) for up to the scan timeout (or the location's longer
    /// ``DeviceLocation/searchTime``) and connects to it; connects to the addresses directly when scanning fails
    /// (scanning may need privileges connecting does not).
    func findAndConnect(_ location: DeviceLocation, notFound: DFUError.Code) async throws(DFUError)
        -> (link: DFULink, peer: PeerAddress)
    {
        let searchTime = max(request.scanTimeout, location.searchTime ?? .zero)
        let deadline = clock.now.advanced(by: searchTime)
        var lastError: DFUError?
        var seen: [String] = []  // what did advertise meanwhile, for the message when the updater is not found
        while clock.now < deadline {
            var found: PeerAddress?
            do {
                let remaining = clock.now.duration(to: deadline)
                logger.debug("looking for the device", metadata: ["location": "\(location)", "for": "\(remaining)"])
                for try await advertisement in updater.adapter.scan(filter: ScanFilter(), duration: remaining) {
                    let name = advertisement.parsed.name
                    let label = advertisement.peer.address.description + (name.map { " (\($0))" } ?? "")
                    if !seen.contains(label) { seen.append(label) }
                    guard location.matches(advertisement) else { continue }
                    let byName = name.map(location.names.contains) ?? false
                    found = advertisement.peer
                    emit(.found(address: advertisement.peer.address.description, name: name ?? "", byName: byName))
                    break
                }
            } catch {
                lastError = DFUError(notFound, "scanning failed: \(error)", cause: error)
                for address in location.addresses {
                    let peer = PeerAddress(address, type: location.addressType)
                    if let link = try? await connect(peer) { return (link, peer) }
                }
                try await pause(Self.retryPause)
                continue
            }
            guard let peer = found else { break }
            logger.debug("connecting", metadata: ["peer": "\(peer)"])
            do {
                return (try await connect(peer), peer)
            } catch {
                lastError = error
                try await pause(Self.retryPause)
            }
        }
        throw DFUError(
            notFound,
            "no DFU updater found (\(location)) within \(Self.seconds(searchTime)) s ("
                + (seen.isEmpty ? "nothing advertised" : "advertising meanwhile: " + seen.joined(separator: ", ")) + ")"
                + (lastError.map { ": \($0.message)" } ?? ""),
            cause: lastError)
    }

    /// Waits on the updater's clock; a cancelled task ends the update (``DFUError/Code/cancelled``).
    func pause(_ duration: Duration) async throws(DFUError) {
        try await context.sleep(for: duration)
    }

    static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        return value == value.rounded() ? "\(Int(value))" : "\(value)"
    }

    // MARK: Opening the updater

    /// The first connection: to the device, else (when it is not at its own address) to where a family's
    /// updater would be for that address, left there by an earlier run.
    func openFirst(_ peer: PeerAddress, sessions: [any FamilySession]) async throws(DFUError) -> OpenedUpdater {
        do {
            return try await openUpdater(initial: peer, location: nil, sessions: sessions)
        } catch where Self.isNotThere(error) && request.target.isAddress {
            let elsewhere = sessions.filter { $0.planError == nil }
                .compactMap { $0.updaterLocation(forApplicationAt: peer, options: request.options) }
            guard let first = elsewhere.first else { throw error }
            let location = elsewhere.dropFirst().reduce(first) { $0.merged(with: $1) }
            let original = error
            do {
                return try await openUpdater(initial: nil, location: location, sessions: sessions)
            } catch where error.code == .notFound {
                throw original
            }
        }
    }

    /// Not found, refused or timed out: the device may be elsewhere.
    static func isNotThere(_ error: DFUError) -> Bool {
        guard error.code == .connection, let cause = error.cause as? AdapterError else { return false }
        return [.deviceNotFound, .connectionRefused, .connectionTimeout].contains(cause.code)
    }

    /// An updater's link, its family, and where it was found: the peer first, then every address and name it was
    /// looked for at (a jump's location: the unique bootloader name `--unique-name` asked for), so that a reconnect
    /// after a lost link looks there again.
    struct OpenedUpdater {
        var link: DFULink
        var session: any FamilySession
        var location: DeviceLocation
    }

    /// Connects (to `initial`, else to whatever `location` finds) and makes sure the link ends at an updater:
    /// detects the family and mode; from an application it jumps and finds the updater. Returns the link, the
    /// family whose updater it is, and where it was found.
    func openUpdater(initial: PeerAddress?, location: DeviceLocation?, sessions: [any FamilySession])
        async throws(DFUError) -> OpenedUpdater
    {
        var (link, peer): (DFULink, PeerAddress)
        var searched: DeviceLocation?
        if let initial {
            (link, peer) = (try await connect(initial), initial)
        } else {
            searched = location ?? DeviceLocation(addresses: [])
            (link, peer) = try await findAndConnect(searched ?? DeviceLocation(addresses: []), notFound: .notFound)
        }
        for _ in 0..<Self.maximumJumps {
            let next: DeviceLocation
            do {
                switch try await detect(on: link, sessions: sessions) {
                case .ready(let session):
                    let found = DeviceLocation(peer)
                    return OpenedUpdater(link: link, session: session, location: searched.map(found.merged(with:)) ?? found)
                case .jump(let session, let bonded, let jump):
                    emit(.applicationMode(address: peer.address.description, bonded: bonded))
                    next = try await jump(link, context)
                }
            } catch {
                await link.close()
                throw error
            }
            await link.close()
            try await pause(request.options.rebootDelay)
            searched = next
            (link, peer) = try await findAndConnect(next, notFound: .notFound)
        }
        await link.close()
        throw DFUError(.notFound, "the device keeps coming back in application mode")
    }

    enum Detected {
        case ready(any FamilySession)
        case jump(any FamilySession, bonded: Bool, FamilySessionJump)
    }

    /// Asks each family in turn what the connected device is. A device whose family cannot take the package is
    /// refused before anything is sent (with that family's one-line reason).
    func detect(on link: DFULink, sessions: [any FamilySession]) async throws(DFUError) -> Detected {
        let services: [GATTService]
        do {
            services = try await link.gatt.discoverPrimaryServices()
        } catch {
            throw Self.linkError(error, doing: "discovering services")
        }
        var withoutEntry: [String] = []
        let address = link.peer.address.description
        for session in sessions {
            let probe = try await session.probe(services, on: link, context: context)
            let mode: DetectedMode
            switch probe {
            case .notMine: continue
            case .applicationWithoutEntry(let reason):
                withoutEntry.append(reason)
                continue
            case .updater: mode = .updater
            case .application: mode = .application
            }
            emit(.detected(family: session.id, mode: mode, address: address))
            if let planError = session.planError {
                throw DFUError(
                    planError.code, "the device speaks \(session.displayName), but \(planError.message)",
                    cause: planError.cause, family: session.id)
            }
            try await precheck(session, mode: mode, services: services, on: link)
            switch probe {
            case .application(let bonded, let jump):
                session.reportPlan(self)
                return .jump(session, bonded: bonded, jump)
            default:
                session.reportPlan(self)
                emit(.updaterReady(family: session.id, address: address))
                return .ready(session)
            }
        }
        if let reason = withoutEntry.first { throw DFUError(.noUpdateService, reason) }
        let names = sessions.map(\.displayName).joined(separator: ", ")
        throw DFUError(.noUpdateService, "the device offers no DFU service of \(names)")
    }
}

