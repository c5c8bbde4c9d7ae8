import BLECore
import DFUCore
import GATT

extension LegacyDFUFamily {
    /// Sends one part from zero over one link (Legacy DFU cannot resume inside an image; see the type's notes).
    public func upload(_ part: LegacyPart, on link: DFULink, context: PartContext<LegacyJournal>) async throws(DFUError)
        -> PartOutcome
    {
        let options = context.update.options
        if context.update.stop.isRequested {
            throw DFUError(.stopped, "stopped before \(part.name) started", family: id)
        }
        let transport: GATTLegacyTransport
        do {
            transport = try await GATTLegacyTransport.open(client: link.gatt)
        } catch {
            throw Self.map(error)
        }
        let services = transport.services.map(\.uuid)
        guard let mode = LegacyDetection.mode(services: services, version: transport.version, hasPacket: transport.packet != nil),
            mode.isReady
        else {
            throw DFUError(.noUpdateService, "the device is not in its Legacy DFU bootloader (\(link.peer.address))", family: id)
        }
        if case .applicationService = mode, part.imageType != .application {
            throw DFUError(
                .incompatiblePackage,
                "the DFU service inside the application (InfiniTime) takes application images only, not \(part.imageType)",
                family: id)
        }
        var journal = context.resume ?? LegacyJournal(partIndex: context.index)
        // A journal from the start of the attempt: a killed run leaves it for `bledfu resume` and the next run,
        // which records the lost attempt.
        journal.beginAttempt(part: context.index)
        await context.checkpoint(journal, confirmedBytes: 0)
        let base = (try? LegacyPacingPolicies.parse(options.pacing)) ?? LegacyAdaptivePacing()
        var configuration = LegacyDFUConfiguration(
            pacing: journal.pacing(base, for: context.index), responseTimeout: options.responseTimeout,
            resetOnCancel: options.abortOnCancel)
        LegacyDetection.configure(&configuration, for: mode)
        let earlier = journal.restarts.filter { $0.part == context.index }
        // What this attempt sends again: the bytes the furthest earlier attempt had sent.
        let previous = earlier.map(\.bytesResent).max() ?? 0
        let driver = LegacyDFUDriver(
            transport: transport, clock: context.update.clock, configuration: configuration, logger: context.update.logger)
        let started = journal
        let reporter = Task {
            var saved = 0
            for await report in driver.progress {
                let p = report.progress
                context.progress(
                    PartProgress(
                        bytesConfirmed: p.bytesConfirmed, totalBytes: p.totalBytes, retries: earlier.count,
                        bytesResent: min(p.bytesSent, previous)))
                // Now and then the bytes sent, so that a run killed here tells the next one what it lost.
                if p.bytesSent - saved >= Self.attemptCheckpointBytes {
                    saved = p.bytesSent
                    var progress = started
                    progress.attemptBytes = p.bytesSent
                    await context.checkpoint(progress, confirmedBytes: 0)
                }
            }
        }
        let result: Result<Void, LegacyDFUError>
        do {
            try await driver.run(part: part, partIndex: context.index, partCount: context.count)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        await driver.finish()
        await reporter.value
        // After Activate the device resets: into its application, or into its bootloader (no peer data: address + 1).
        let here = link.peer.address
        let around = DeviceLocation(addresses: [here, here.nordicBootloaderAddress], addressType: link.peer.type)
        guard case .failure(let error) = result else { return .resets(around) }
        guard error.restartsFromZero else { throw Self.map(error, location: around) }
        journal.recordRestart(part: context.index, error: error, bytesSent: await driver.bytesSent, window: await driver.lastWindow)
        await context.checkpoint(journal, confirmedBytes: 0)
        if let final = restartPolicy.verdict(journal, part: context.index, after: error) {
            throw DFUError(.verificationFailed, "\(part.name): \(final.reason)", cause: final, family: id)
        }
        let sent = await driver.bytesSent
        context.update.emit(.warning("\(part.name): \(error.reason); \(sent) bytes will be sent again"))
        // A lost link leaves the bootloader where it was; a reset brings it back at address + 1, or (dual bank)
        // brings the old application back at its address.
        let next = error.code == .disconnected ? DeviceLocation(link.peer).merged(with: around) : around
        throw DFUError(.linkLost, "\(part.name): \(error.reason)", cause: error, family: id, location: next)
    }

    /// How often (bytes sent) an attempt's progress goes into the journal.
    static let attemptCheckpointBytes = 8192

    /// The engine's error in the family vocabulary (the engine's error stays the cause).
    static func map(_ error: LegacyDFUError, location: DeviceLocation) -> DFUError {
        let code: DFUError.Code
        var where_: DeviceLocation?
        switch error.code {
        case .remote: code = .remoteRefusal
        case .timeout: code = .timeout
        case .activateUnconfirmed:
            code = .unconfirmed
            where_ = location
        case .incompatible: code = .incompatiblePackage
        case .cancelled: code = .cancelled
        case .stopped: code = .stopped
        case .gaveUp, .bytesLost: code = .verificationFailed
        case .transport: code = .transport
        case .disconnected, .deviceReset: code = .linkLost
        default: code = .protocolViolation
        }
        return DFUError(code, error.reason, cause: error, family: .legacy, location: where_)
    }
}
