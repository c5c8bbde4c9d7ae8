import BLECore
import DFUCore
import Synchronization

/// Every part of one family's plan, in order, over as many links as it takes: the updater's part of
/// `bledfu flash` after the first connection. A lost link is retried under the request's ``ReconnectPolicy``
/// (episodes without progress in a row are bounded); an unacknowledged last step is settled by looking at the
/// device; a part the device already holds is skipped (unless it is the last); a stop request ends the run at the
/// family's next safe point with ``DFUError/Code/stopped``.
struct PartLoop<F: DFUFamily> {
    let family: F
    let plan: FamilyPlan<F.Part>
    let flow: UpdateFlow
    let session: any FamilySession
    let options: UpdateOptions
    /// The application's place: after an update or a system part the device may boot it.
    let application: DeviceLocation
    var connection: DFULink?
    /// Where the updater was last found.
    var location: DeviceLocation
    var journal: UpdateJournal
    var partIndex: Int
    var budget: ReconnectBudget
    var lastLoss: DFUError?
    var unconfirmed = false
    /// What the families said about how each part got there (``PartOutcome/summary``), for the result.
    var notes: [String] = []

    /// `location`: where the updater was found (its peer, and the names it was looked for by after a jump).
    init(
        session: TypedFamilySession<F>, plan: FamilyPlan<F.Part>, flow: UpdateFlow, link: DFULink,
        location: DeviceLocation, journal: UpdateJournal?
    ) async {
        self.family = session.family
        self.plan = plan
        self.flow = flow
        self.session = session
        self.options = flow.request.options
        let applicationPeer = await flow.applicationPeer ?? link.peer
        application = DeviceLocation(applicationPeer)
        connection = link
        self.location = location
        var start = await flow.freshJournal(family: session.family.id, partIndex: 0)
        if let journal {
            if journal.family == session.family.id {
                start = journal
            } else {
                flow.emit(.warning("the journal is for \(journal.family), the device speaks \(session.family.id): starting afresh"))
            }
        }
        self.journal = start
        partIndex = max(0, min(start.partIndex, plan.parts.count - 1))
        budget = ReconnectBudget(policy: flow.request.reconnect)
    }

    mutating func run() async throws(DFUError) -> String? {
        while partIndex < plan.parts.count {
            let part = plan.parts[partIndex]
            var after = try await confirmUnacknowledged(part)
            if after == nil {
                guard let sent = try await send(part) else { continue }
                after = sent
            }
            try await partDone(part, after: after)
        }
        return try await finish()
    }

    /// When the last step of a part went unacknowledged and the link is down: looks at the device. Returns where
    /// it went when the step took effect (it restarted into its application); nil to send the part (again).
    mutating func confirmUnacknowledged(_ part: F.Part) async throws(DFUError) -> PartOutcome.After? {
        guard connection == nil, unconfirmed else { return nil }
        unconfirmed = false
        switch try await flow.confirmInstalled(
            location.merged(with: application), session: session, expectedVersion: part.applicationVersion)
        {
        case .updater(let link):
            connection = link
            flow.meter.countLinkLoss()  // still in the updater: the step never arrived
            return nil
        case .installed:
            flow.emit(.message("\(part.name): the device restarted into its application: the last step took effect"))
            return .resets(location)
        case .otherApplication(let shown):
            // A dual-bank device that lost power boots its old application: jump again and send again.
            let loss = DFUError(
                .linkLost,
                "\(part.name): the device restarted into application version \(shown), not "
                    + "\(part.applicationVersion.map(String.init) ?? "?"): the last step did not take effect",
                family: family.id)
            flow.meter.countLinkLoss()
            guard budget.linkLost(progressed: false) else { throw loss }
            flow.emit(.warning("\(loss.message); updating again"))
            lastLoss = loss
            return nil
        }
    }

    /// Sends `part` over the link, reconnecting first when there is none. Returns what happens to the device next,
    /// or nil when the part failed in a way the loop retries (the link is then closed). A part the updater refused
    /// for good ends the update, with the device brought out of the updater where the family can.
    mutating func send(_ part: F.Part) async throws(DFUError) -> PartOutcome.After? {
        if connection == nil {
            // The device may come back in its updater, or in its application (a power loss on a dual-bank device
            // boots the old application): look at both places. The unique name a jump asked for stays a place to
            // look (it is not in the link's peer).
            let opened = try await flow.reconnect(location.merged(with: application), after: lastLoss, session: session)
            connection = opened.link
            location = opened.location.merged(with: DeviceLocation(addresses: [], names: location.names))
        }
        guard let link = connection else { return nil }
        let before = journal.confirmedBytes
        do {
            let outcome = try await upload(part, on: link)
            if let summary = outcome.summary { notes.append("\(part.name): \(summary)") }
            return outcome.after
        } catch {
            connection = nil
            if let refused = refusal(error, part: part) {
                // Never strand the device: out of the updater, and say where it is.
                throw await flow.leaveUpdater(after: refused, link: link, session: session, application: application)
            }
            await link.close()
            try await failed(error, part: part, confirmedBefore: before)
            return nil
        }
    }

    /// A part is on the device: the next part's journal, and, when the device resets, where to find it.
    mutating func partDone(_ part: F.Part, after: PartOutcome.After?) async throws(DFUError) {
        let count = plan.parts.count
        flow.emit(.partCompleted(part: partIndex + 1, name: part.name))
        partIndex += 1
        budget = ReconnectBudget(policy: budget.policy)
        lastLoss = nil
        journal = await flow.freshJournal(family: family.id, partIndex: partIndex)
        if partIndex < count { await flow.saveJournal(journal) }
        if case .resets(let next)? = after {
            // The device resets into its updater or, after a system part, into the application (then jump).
            await connection?.close()
            connection = nil
            location = next.merged(with: application)
            if partIndex < count { try await flow.pause(options.rebootDelay) }
        }
    }

    /// After the last part: the family's finish; the parts' notes and the finish's summary, joined by "; ".
    mutating func finish() async throws(DFUError) -> String? {
        let finished: FinishOutcome
        do {
            finished = try await family.finish(
                plan, on: connection, location: location.merged(with: application), context: flow.context)
        } catch {
            await connection?.close()
            throw error.from(family.id)
        }
        await connection?.close()
        let lines = notes + [finished.summary].compactMap { $0 }
        return lines.isEmpty ? nil : lines.joined(separator: "; ")
    }

    /// One part over one link, with the journal kept at every safe point the family reports.
    mutating func upload(_ part: F.Part, on link: DFULink) async throws(DFUError) -> PartOutcome {
        let index = partIndex
        let count = plan.parts.count
        flow.emit(.uploading(part: index + 1, parts: count, name: part.name, bytes: part.byteCount))
        var resume: F.Resume?
        if journal.partIndex == index, let payload = journal.resume {
            do {
                resume = try payload.decode(F.Resume.self)
            } catch {
                flow.emit(.warning("\(error); sending \(part.name) from its start"))
            }
        }
        let box = Mutex(journal)
        let flow = self.flow
        let context = PartContext<F.Resume>(
            update: flow.context, index: index, count: count, resume: resume,
            checkpoint: { state, confirmed in
                let payload: ResumePayload?
                do {
                    payload = try ResumePayload(state)
                } catch {
                    flow.emit(.warning("\(error)"))
                    payload = nil
                }
                let updated = box.withLock { journal -> UpdateJournal in
                    journal.partIndex = index
                    journal.confirmedBytes = confirmed
                    journal.resume = payload
                    return journal
                }
                await flow.saveJournal(updated)
            },
            progress: { progress in flow.emit(.progress(flow.meter.report(progress, part: index, parts: count))) })
        flow.meter.beginRun(base: journal.partIndex == index ? journal.confirmedBytes : 0)
        defer { flow.meter.endRun() }
        do {
            let outcome = try await family.upload(part, on: link, context: context)
            journal = box.withLock { $0 }
            return outcome
        } catch {
            journal = box.withLock { $0 }
            throw error.from(family.id)
        }
    }

    /// A part the updater refused for good (not a lost link, not a stop, not a part the device holds before the
    /// last): the error the update ends with.
    func refusal(_ error: DFUError, part: F.Part) -> DFUError? {
        guard !flow.stop.isRequested, [.remoteRefusal, .incompatiblePackage, .alreadyPresent].contains(error.code) else {
            return nil
        }
        if error.code == .alreadyPresent, partIndex < plan.parts.count - 1 { return nil }
        return DFUError(error.code, "\(part.name): \(error.message)", cause: error.cause ?? error, family: family.id)
    }

    /// A part failed over its link: stop, skip, retry or give up.
    mutating func failed(_ error: DFUError, part: F.Part, confirmedBefore before: Int) async throws(DFUError) {
        if flow.stop.isRequested || [.stopped, .cancelled].contains(error.code) {
            if error.code == .cancelled {
                if options.abortOnCancel {
                    await flow.removeJournal()
                    throw DFUError(.cancelled, "aborted: the device discarded the upload", cause: error, family: family.id)
                }
                throw DFUError(.cancelled, "cancelled; the upload is resumable", cause: error, family: family.id)
            }
            throw DFUError(.stopped, "stopped at a safe point", cause: error, family: family.id)
        }
        if partIndex < plan.parts.count - 1, error.code == .alreadyPresent {
            flow.emit(.message("\(part.name): \(error.message); skipping to the next part"))
            flow.emit(.partSkipped(part: partIndex + 1, name: part.name, reason: error.message))
            flow.meter.countSkipped()
            partIndex += 1
            journal = await flow.freshJournal(family: family.id, partIndex: partIndex)
            return
        }
        guard error.isLinkLoss || error.code == .unconfirmed else {
            throw DFUError(error.code, "\(part.name): \(error.message)", cause: error.cause ?? error, family: family.id)
        }
        if error.code == .unconfirmed {
            // Not a loss: the next connection only looks where the device is.
            unconfirmed = true
            if let next = error.location { location = next }
            return
        }
        lastLoss = error
        // The family may know better where the device comes back (Legacy DFU: a reset moves the bootloader to
        // address + 1, or brings a dual-bank device's old application back at its address).
        if let next = error.location { location = next.merged(with: location) }
        flow.meter.countLinkLoss()
        guard budget.linkLost(progressed: journal.confirmedBytes > before) else {
            let attempts = budget.policy.attempts
            let why = attempts == 0 ? "not reconnecting" : "no progress after \(attempts) reconnect episodes"
            throw DFUError(error.code, "\(part.name): \(error.message) (\(why))", cause: error.cause ?? error, family: family.id)
        }
        flow.emit(.warning("\(part.name): \(error.message); reconnecting"))
    }
}
