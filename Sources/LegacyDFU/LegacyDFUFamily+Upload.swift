import BLECore
import DFUCore
import GATT
import Logging

extension LegacyDFUFamily {
    /// Sends one part from zero over one link (Legacy DFU cannot resume inside an image; see the type's notes).
    public func upload(_ part: LegacyPart, on link: DFULink, context: PartContext<LegacyJournal>) async throws(DFUError)
        -> PartOutcome
    {
        if context.update.stop.isRequested {
            throw DFUError(.stopped, "stopped before \(part.name) started", family: id)
        }
        let (transport, mode, identity) = try await openBootloader(for: part, on: link)
        var journal = context.resume ?? LegacyJournal(partIndex: context.index)
        reportLostApplication(&journal, part: part, mode: mode, on: link, context: context)
        // A journal from the start of the attempt: a killed run leaves it for `bledfu resume` and the next run,
        // which records the lost attempt.
        journal.beginAttempt(part: context.index)
        await context.checkpoint(journal, confirmedBytes: 0)
        let driver = makeDriver(
            transport: transport, mode: mode, identity: identity, mtu: await link.mtu, journal: journal, context: context)
        let reporter = reportProgress(of: driver, journal: journal, context: context)
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
        guard case .failure(let error) = result else {
            // The journal holds this part's restarts (this run's and the killed runs'): the result says them.
            return .resets(around, summary: journal.summary(of: context.index))
        }
        guard error.restartsFromZero else {
            // An attempt that ends otherwise is closed in the journal too (the updater may try again after a
            // timeout): only a run that stopped without a word (killed) leaves it open for the next run to count.
            if ![.cancelled, .stopped].contains(error.code) {
                journal.recordRestart(part: context.index, error: error, bytesSent: await driver.bytesSent)
                await context.checkpoint(journal, confirmedBytes: 0)
            }
            throw Self.map(error, location: around)
        }
        journal.recordRestart(part: context.index, error: error, bytesSent: await driver.bytesSent, window: await driver.lastWindow)
        if error.code == .deviceReset { journal.resetAt = here.description }
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

    /// Opens the Legacy transport, checks the device is ready to take `part` and reads what it tells of itself
    /// (``LegacyBootloaderIdentity``: the engine checks the init packet's device type against it before Start).
    func openBootloader(for part: LegacyPart, on link: DFULink) async throws(DFUError)
        -> (GATTLegacyTransport, LegacyDeviceMode, LegacyBootloaderIdentity)
    {
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
        let identity: LegacyBootloaderIdentity
        do {
            identity = try await LegacyBootloaderIdentity.read(services: transport.services, client: link.gatt)
        } catch {
            throw Self.map(error, doing: "reading the device's name and manufacturer")
        }
        return (transport, mode, identity)
    }

    /// After the host reset a bootloader in the middle of an image, where the device came back tells whether it
    /// still has an application: the SDK 11 and Adafruit bootloaders boot a valid application after a reset and
    /// stay in the bootloader (advertising at address + 1, without the application's peer data) only when there is
    /// none (legacy-dfu.md §7.4 `main.c`; §7.5: a single-bank bootloader erased bank 0 at Start, an SoftDevice update
    /// invalidated it). A dual-bank device comes back as its old application, and the jump finds the bootloader at
    /// the application's address. Says so in a warning: the device stays in its bootloader until the update ends.
    func reportLostApplication(
        _ journal: inout LegacyJournal, part: LegacyPart, mode: LegacyDeviceMode, on link: DFULink,
        context: PartContext<LegacyJournal>
    ) {
        defer { journal.resetAt = nil }
        guard let text = journal.resetAt, let resetAddress = BluetoothAddress(text), case .bootloader = mode,
            link.peer.address != resetAddress, link.peer.address == resetAddress.nordicBootloaderAddress
        else { return }
        context.update.emit(
            .warning(
                "the device lost its application: after the reset it stayed in its bootloader (\(link.peer.address)); "
                    + "it stays there until \(part.name) and the rest of the update are installed"))
    }

    func makeDriver(
        transport: GATTLegacyTransport, mode: LegacyDeviceMode, identity: LegacyBootloaderIdentity, mtu: Int,
        journal: LegacyJournal, context: PartContext<LegacyJournal>
    ) -> LegacyDFUDriver<UpdateClock> {
        let options = context.update.options
        let base = (try? LegacyPacingPolicies.parse(options.pacing)) ?? LegacyAdaptivePacing()
        var configuration = LegacyDFUConfiguration(
            pacing: journal.pacing(base, for: context.index), responseTimeout: options.responseTimeout,
            resetOnCancel: options.abortOnCancel)
        LegacyDetection.configure(&configuration, for: mode)
        configuration.requiredDeviceType = identity.requiredDeviceType
        configuration.packetSize = Self.packetSize(mtu: mtu, identity: identity, pacing: configuration.pacing)
        context.update.logger.debug("legacy packets", metadata: ["dfu.packet": "\(configuration.packetSize)", "dfu.mtu": "\(mtu)"])
        return LegacyDFUDriver(
            transport: transport, clock: context.update.clock, configuration: configuration, logger: context.update.logger)
    }

    /// Forwards the driver's progress; now and then puts the bytes sent into the journal, so that a run killed
    /// during the image tells the next one what it lost.
    func reportProgress(of driver: LegacyDFUDriver<UpdateClock>, journal started: LegacyJournal, context: PartContext<LegacyJournal>)
        -> Task<Void, Never>
    {
        let earlier = started.restarts.filter { $0.part == context.index }
        // What this attempt sends again: the bytes the furthest earlier attempt had sent.
        let previous = earlier.map(\.bytesResent).max() ?? 0
        return Task {
            var saved = 0
            for await report in driver.progress {
                let p = report.progress
                context.progress(
                    PartProgress(
                        bytesConfirmed: p.bytesConfirmed, totalBytes: p.totalBytes, retries: earlier.count,
                        bytesResent: min(p.bytesSent, previous)))
                if p.bytesSent - saved >= Self.attemptCheckpointBytes {
                    saved = p.bytesSent
                    var progress = started
                    progress.attemptBytes = p.bytesSent
                    await context.checkpoint(progress, confirmedBytes: 0)
                }
            }
        }
    }

    /// Bytes per firmware Packet write. 20 (`MAX_DFU_PKT_LEN`; InfiniTime asserts it) unless the device takes more:
    /// the Adafruit bootloader since d28c2e0 sizes its Packet characteristic MTU − 3 (MTU up to 247, rounded down to
    /// a multiple of 4 plus 3; an older one pinned the MTU to 23, so the link's MTU says which). A pacing that sizes
    /// packets from the MTU (`android`, Android-DFU-Library's default) sends MTU − 3 whatever the device takes.
    /// Always a multiple of 4 (the SDK refuses other data lengths) and at least 20.
    public static func packetSize(mtu: Int, identity: LegacyBootloaderIdentity, pacing: any LegacyPacingPolicy) -> Int {
        if pacing.sizesPacketsFromMTU { return max(20, (mtu - 3) & ~3) }
        if identity.isAdafruit { return max(20, (min(mtu, 247) - 3) & ~3) }
        return 20
    }

    /// How often (bytes sent) an attempt's progress goes into the journal.
    public static let attemptCheckpointBytes = 8192

    /// Whether the device refused the package itself rather than the moment (legacy-dfu.md §4, §5.3-5.4, SDK 11
    /// `dfu_transport_ble.c`, the bank files' `dfu_init_pkt_handle`, `dfu_init_template.c`): Start DFU answered
    /// `10 01 04` (an image larger than the bank or the bootloader region), or Initialize DFU Parameters answered
    /// `10 02 06` (the init packet's device type, revision or SoftDevice list does not fit the device, or it is too
    /// short). Both end in `incompatible-package` (exit 46), as a Secure device's refusal of a package does.
    static func refusesPackage(_ error: LegacyDFUError) -> Bool {
        switch (error.request, error.status) {
        case (.startDFU?, .dataSizeExceedsLimit?), (.initialize?, .operationFailed?): true
        default: false
        }
    }

    /// The engine's error in the family vocabulary (the engine's error stays the cause).
    static func map(_ error: LegacyDFUError, location: DeviceLocation) -> DFUError {
        let code: DFUError.Code
        var where_: DeviceLocation?
        switch error.code {
        case .remote: code = refusesPackage(error) ? .incompatiblePackage : .remoteRefusal
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
