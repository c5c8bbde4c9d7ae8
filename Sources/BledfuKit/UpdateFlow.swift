import BLECore
import DFUCore
import GATT
import Logging
import Synchronization

/// The flow of one update (``UpdateRun`` runs it): pick the family, find and connect to the device, open its
/// updater (jumping from the application when needed), then hand over to the family's part loop
/// (``TypedFamilySession``). Connections, scans and reconnects are in `UpdateFlow+Connect.swift`.
actor UpdateFlow {
    let updater: Updater
    let request: UpdateRequest
    nonisolated let stop = StopSignal()
    nonisolated let meter: ProgressMeter
    private nonisolated let continuation: AsyncStream<UpdateEvent>.Continuation
    /// The watchdog every event feeds (nil: none).
    nonisolated let activity: StallGuard?
    /// Between the first connection and the end of the last part: a stop then waits for a safe point.
    private nonisolated let underWay = Mutex(false)
    /// The device's address as given (or found by name): the journal's key.
    var deviceAddress = ""
    /// The application's address: where the device is after an update or a system part.
    var applicationPeer: PeerAddress?

    init(
        updater: Updater, request: UpdateRequest, events: AsyncStream<UpdateEvent>.Continuation,
        activity: StallGuard? = nil
    ) {
        self.updater = updater
        self.request = request
        self.continuation = events
        self.activity = activity
        self.meter = ProgressMeter(clock: updater.clock)
    }

    nonisolated func emit(_ event: UpdateEvent) {
        activity?.touch(event)
        continuation.yield(event)
    }

    var clock: UpdateClock { updater.clock }
    var logger: Logger { updater.logger }

    /// The context families work in.
    nonisolated var context: UpdateContext {
        UpdateContext(
            clock: updater.clock, options: request.options, stop: stop, logger: updater.logger,
            emit: { [continuation, activity] event in
                activity?.touch(event)
                continuation.yield(event)
            },
            connect: { [weak self] location throws(DFUError) in
                guard let self else { throw DFUError(.cancelled, "the update ended") }
                return try await self.findAndConnect(location, notFound: .notFound).link
            })
    }

    /// Records the stop request; returns whether a transfer is under way (then the stop waits for a safe point).
    nonisolated func requestStop() -> Bool {
        let running = underWay.withLock { $0 }
        stop.request()
        return running
    }

    nonisolated func setUnderWay(_ value: Bool) { underWay.withLock { $0 = value } }

    nonisolated var isTransferring: Bool { underWay.withLock { $0 } }

    func run() async throws(DFUError) -> UpdateResult {
        let sessions = try planAll()
        let peer = try await resolveTarget()
        deviceAddress = peer.address.description
        applicationPeer = peer
        let journal = await loadJournal()
        emit(.connecting(address: deviceAddress))
        let opened = try await openFirst(peer, sessions: sessions)
        setUnderWay(true)
        defer { setUnderWay(false) }
        let summary = try await opened.session.runParts(
            flow: self, link: opened.link, location: opened.location, journal: journal)
        meter.finish()
        await removeJournal()
        emit(.completed(address: deviceAddress))
        return UpdateResult(
            family: opened.session.id, deviceAddress: deviceAddress, statistics: meter.statistics, summary: summary)
    }

    // MARK: Families and the package

    /// Every candidate family with its plan of the package (or why it has none). Throws when no family can plan
    /// it: the most telling error (a malformed package before "another family's package").
    func planAll() throws(DFUError) -> [any FamilySession] {
        let sessions = try Updater.sessions(
            request.package, family: request.family, options: request.options, families: updater.families)
        let planned = sessions.filter { $0.planError == nil }
        if planned.count == 1 { planned[0].reportPlan(self) }
        return sessions
    }

    // MARK: Journal

    func loadJournal() async -> UpdateJournal? {
        let sha = request.package.sha256
        let journal: UpdateJournal?
        do {
            journal = try await updater.journalStore.load(deviceAddress: deviceAddress, packageSHA256: sha)
        } catch {
            emit(.warning("\(error); starting afresh"))
            return nil
        }
        if let journal, journal.partIndex > 0 || journal.confirmedBytes > 0 {
            emit(
                .message(
                    "continuing a previous upload: part \(journal.partIndex + 1), \(journal.confirmedBytes) bytes executed"))
        }
        return journal
    }

    func saveJournal(_ journal: UpdateJournal) async {
        do {
            try await updater.journalStore.save(journal)
            meter.countCheckpoint()
        } catch {
            // The journal only speeds up a later resume; the transfer itself is unaffected.
            emit(.warning("\(error)"))
        }
    }

    func removeJournal() async {
        // A journal left behind is harmless: it names this package's SHA-256, and the next run finds the device done.
        try? await updater.journalStore.remove(deviceAddress: deviceAddress, packageSHA256: request.package.sha256)
    }

    func freshJournal(family: DFUFamilyID, partIndex: Int) -> UpdateJournal {
        UpdateJournal(
            deviceAddress: deviceAddress, packageSHA256: request.package.sha256, family: family, partIndex: partIndex)
    }
}
