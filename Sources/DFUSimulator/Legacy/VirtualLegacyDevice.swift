import ATT
import BLECore
import GATT
import LegacyDFU
import Logging
import Synchronization

/// A virtual Legacy DFU device: an nRF5 SDK ≤ 11 (or SDK ≤ 6.1, or Adafruit) bootloader with an application that
/// offers the legacy buttonless entry, or an InfiniTime-class watch whose application holds the DFU service.
///
/// Like ``VirtualDevice``: it keeps its profile, flash, settings and installed images across connections and resets
/// for as long as it lives; `serve(_:)` runs one connection until the link ends; the caller reads
/// ``currentAdvertisement`` in between (the address and the advertising change with the jump to the bootloader and
/// with every reset: peer data are handed over once). Flash completions and timers (the Start erase, the last
/// write, the DFU inactivity timer, InfiniTime's delayed answers) run on the injected clock. No files, no sockets.
public actor VirtualLegacyDevice {
    public nonisolated let profile: LegacyDeviceProfile
    public private(set) var mode: LegacyBootTarget
    var bootloader: LegacyBootloader
    var watch: InfiniTimeDFU?
    let application: LegacyApplicationDFU
    /// The running bootloader got the central's peer data from the application's jump (same address; SDK 11
    /// advertises directed to that central). Any reset loses them (`dfu_ble_peer_data_get` corrupts the CRC).
    var peerData = false
    /// The central adapter of the link being served, and of the one that jumped: SDK 11's directed advertising is
    /// addressed to that central (docs/virtual-radio.md §2, `directed_to`).
    var linkCentral: String?
    var jumpCentral: String?
    /// Until when SDK 11 advertises directed (50 × 1.28 s from the jump or the last disconnect); then the DFU
    /// timeout ends the bootloader. The timer is a protocol timer: not divided by the speedup.
    var directedUntil: Duration?
    var directedTask: Task<Void, Never>?
    /// How long SDK 11 advertises directed (``directedAdvertisingTime``; tests shorten it).
    let directedAdvertisingTime: Duration
    var connected = false
    var server: GATTServer?
    var controlPoint: UInt16?
    var wakeTask: Task<Void, Never>?
    var wakeAt: Duration?
    var packetWrites = 0
    let now: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async -> Void
    let makeServer: @Sendable (GATTDatabase, any ATTBearer, UInt16) -> GATTServer
    let statusSink: (@Sendable (LegacyDeviceState) async -> Void)?
    let persistentSink: (@Sendable (LegacyPersistentState) async -> Void)?
    let logger: Logger
    nonisolated let pacer: LinkPacer

    public init<C: Clock<Duration>>(
        profile: LegacyDeviceProfile, faults: FaultPlan = .none, clock: C,
        statusSink: (@Sendable (LegacyDeviceState) async -> Void)? = nil, restoring: LegacyPersistentState? = nil,
        persistentSink: (@Sendable (LegacyPersistentState) async -> Void)? = nil,
        logger: Logger = Logger(label: "bledfu.simulator.legacy"), sharedAir: SharedAir? = nil,
        directedAdvertisingTime: Duration = VirtualLegacyDevice.directedAdvertisingTime
    ) {
        self.profile = profile
        self.directedAdvertisingTime = directedAdvertisingTime
        var bootloader = LegacyBootloader(profile: profile, faults: faults)
        if let restoring { bootloader.restore(restoring) }
        self.bootloader = bootloader
        application = LegacyApplicationDFU(kind: profile.kind)
        watch = profile.kind == .infinitime ? InfiniTimeDFU(profile: profile, faults: faults) : nil
        if let restoring, profile.kind == .infinitime { watch?.installed = restoring.installed }
        let start = clock.now
        now = { start.duration(to: clock.now) }
        sleep = { duration in
            guard duration > .zero else { return }
            try? await clock.sleep(for: duration)  // Cancellation ends the wait early; the device goes on.
        }
        makeServer = { database, bearer, mtu in GATTServer(database: database, bearer: bearer, maximumMTU: mtu, clock: clock) }
        self.statusSink = statusSink
        self.persistentSink = persistentSink
        self.logger = logger
        pacer = LinkPacer(
            model: LinkModel(link: profile.link, flash: profile.flash), speedup: profile.speedup, sharedAir: sharedAir)
        if profile.kind == .infinitime {
            mode = .application
        } else {
            mode = restoring?.mode == .bootloader || !bootloader.applicationValid ? .bootloader : .application
            if mode == .bootloader { self.bootloader.boot(at: .zero) }
        }
    }

    deinit {
        wakeTask?.cancel()
        directedTask?.cancel()
    }

    /// APP_DIRECTED_ADV_TIMEOUT: 50 directed advertising rounds of 1.28 s (`dfu_transport_ble.c`).
    public static let directedAdvertisingTime: Duration = .milliseconds(50 * 1280)

    // MARK: What the world sees

    /// The address of the current mode: the bootloader without peer data advertises at address + 1 (`addr[0]`
    /// incremented without carry, `dfu_transport_update_start`).
    public var currentAddress: BluetoothAddress {
        mode == .bootloader && !peerData ? profile.address.nordicBootloaderAddress : profile.address
    }

    public var currentName: String { mode == .application ? profile.name : profile.bootloaderName }

    /// SDK 11 with peer data: ADV_DIRECT_IND to the central that jumped, no AD data (Adafruit advertises undirected).
    public var directedAdvertising: Bool { mode == .bootloader && peerData && profile.kind != .adafruit }

    /// Application: flags and name (InfiniTime also lists the DFU service). Bootloader: flags 0x06, the complete
    /// name and the 128-bit DFU service UUID ("more available" list), as `advertising_init` builds it; nothing
    /// when advertising directed.
    public var currentAdvertisement: Advertisement {
        let peer = PeerAddress(currentAddress, type: profile.addressType)
        if directedAdvertising { return Advertisement(peer: peer, rssi: -50, data: [], directedTo: jumpCentral) }
        var data: [UInt8] = [2, 0x01, 0x06]
        let name = Array(currentName.utf8.prefix(26))
        data += [UInt8(1 + name.count), 0x09] + name
        if mode == .bootloader || profile.kind == .infinitime {
            data += [17, 0x06] + LegacyDFUUUID.service.littleEndian128
        } else if profile.kind == .sdk11 {
            // ble_app_hrs advertises Heart Rate, Battery and Device Information (16-bit, complete list).
            data += [7, 0x03, 0x0D, 0x18, 0x0F, 0x18, 0x0A, 0x18]
        }
        return Advertisement(peer: peer, rssi: -50, data: data)
    }

    public var firmwareRevision: String { String(installed.application?.version ?? 0) }

    var installed: InstalledImages { watch?.installed ?? bootloader.installed }

    /// A snapshot of everything observable.
    public func state() -> LegacyDeviceState {
        LegacyDeviceState(
            family: "legacy", kind: profile.kind, mode: mode, address: currentAddress.description,
            addressType: profile.addressType, name: currentName, directedAdvertising: directedAdvertising,
            installed: installed, bank0: bootloader.bank0, softdeviceFWID: bootloader.softDeviceFWID,
            transfer: watch?.transferSnapshot ?? bootloader.transferSnapshot,
            counters: watch?.counters ?? bootloader.counters, faults: watch?.faultLog ?? bootloader.faultLog,
            connected: connected)
    }

    /// What survives a power cycle.
    public func persistentState() -> LegacyPersistentState {
        LegacyPersistentState(
            mode: mode, installed: installed, bank0: bootloader.bank0, softdeviceFWID: bootloader.softDeviceFWID,
            applicationStart: bootloader.applicationStart)
    }

    func publish() async {
        await statusSink?(state())
        if let persistentSink { await persistentSink(persistentState()) }
    }

    // MARK: Connections

    /// Serves one connection on `bearer` until the link ends.
    public func serve(_ bearer: any ATTBearer) async {
        if directedAdvertising, let target = jumpCentral, bearer.linkInfo.centralAdapter != target {
            // ADV_DIRECT_IND: the SoftDevice takes a connection request from the addressed central only.
            logger.debug("virtual legacy device ignores a central it does not advertise to", metadata: ["sim.target": "\(target)"])
            await bearer.close()
            return
        }
        connected = true
        linkCentral = bearer.linkInfo.centralAdapter
        stopDirectedTimer()
        // A link from a named central adapter shares that adapter's air with its other links.
        let seat = pacer.connected(bearer.linkInfo, at: now())
        defer { pacer.disconnected(seat) }
        let servedMode = mode
        let database =
            servedMode == .application
            ? LegacyDeviceDatabases.application(profile: profile, firmwareRevision: firmwareRevision)
            : LegacyDeviceDatabases.bootloader(profile: profile)
        let server = makeServer(database, bearer, UInt16(clamping: max(profile.link.maxMTU, 23)))
        self.server = server
        controlPoint = database.handle(of: LegacyDFUUUID.controlPoint, in: LegacyDFUUUID.service)
        let delegate = LegacyDeviceDelegate(device: self, database: database)
        await server.setDelegate(delegate)
        _ = await perform(machineEvent(.connected), server: server)
        logger.debug("virtual legacy device connected", metadata: ["sim.mode": "\(servedMode)"])
        await publish()
        let reason = await server.run()
        logger.debug("virtual legacy device link ended", metadata: ["sim.reason": "\(reason)"])
        self.server = nil
        connected = false
        if mode == servedMode { _ = await perform(machineEvent(.disconnected), server: nil) }
        // On a disconnect SDK 11 starts its (directed) advertising again with a fresh count.
        if directedAdvertising { startDirectedTimer() }
        await publish()
    }

    /// Directed advertising started: after `directedAdvertisingTime` without a connection the bootloader's DFU
    /// timeout ends it (the application starts when it is valid, else the bootloader again, without peer data).
    func startDirectedTimer() {
        directedTask?.cancel()
        let until = now() + directedAdvertisingTime
        directedUntil = until
        let sleep = self.sleep
        let delay = directedAdvertisingTime
        directedTask = Task { [weak self] in
            await sleep(delay)
            guard !Task.isCancelled else { return }
            await self?.directedAdvertisingEnded(at: until)
        }
    }

    func stopDirectedTimer() {
        directedTask?.cancel()
        directedTask = nil
        directedUntil = nil
    }

    func directedAdvertisingEnded(at until: Duration) async {
        guard directedUntil == until, !connected, directedAdvertising else { return }
        directedTask = nil
        directedUntil = nil
        logger.debug("virtual legacy device: directed advertising timed out, the bootloader exits")
        reboot(into: bootloader.applicationValid ? .application : .bootloader)
        await publish()
    }

    /// Power loss now (also while no connection is served).
    public func powerLoss() async {
        _ = await perform(machineEvent(.powerLoss), server: server)
        if let server { await server.close() }
        await publish()
    }

    /// The machine of the current mode handles `event` (the application mode has none, InfiniTime aside).
    func machineEvent(_ event: LegacyBootloaderEvent) -> [LegacyBootloaderAction] {
        if var watch {
            let actions = watch.handle(event, at: now())
            self.watch = watch
            return actions
        }
        guard mode == .bootloader else { return [] }
        return bootloader.handle(event, at: now())
    }

    /// Carries out machine actions; returns the ATT error to answer the write with, if any. A disconnect or
    /// reboot closes the link once the write being handled is answered (the SDK authorizes the write first).
    func perform(_ actions: [LegacyBootloaderAction], server: GATTServer?) async -> ATTErrorCode? {
        var refusal: ATTErrorCode?
        for action in actions {
            switch action {
            case .notify(let bytes):
                guard let server, let controlPoint else { continue }
                // A failed notify means the link is gone; the server records why and `serve` sees it end.
                try? await server.notify(handle: controlPoint, value: bytes)
            case .attError(let code): refusal = code
            case .wait(let duration): await sleep(duration)
            case .wake(let at): scheduleWake(at)
            case .fault: break
            case .disconnect: await server?.closeAfterResponse()
            case .reboot(let target):
                reboot(into: target)
                await server?.closeAfterResponse()
            }
        }
        return refusal
    }

    func reboot(into target: LegacyBootTarget) {
        logger.debug("virtual legacy device resets", metadata: ["sim.into": "\(target)"])
        peerData = false
        jumpCentral = nil
        stopDirectedTimer()
        mode = profile.kind == .infinitime ? .application : target
        // RAM starts afresh; the bootloader's timer runs only while it runs.
        bootloader.boot(at: now(), timer: mode == .bootloader)
        if let deadline = bootloader.nextWake, mode == .bootloader { scheduleWake(deadline) }
    }

    /// Runs ``LegacyBootloaderEvent/tick`` at device time `at` (one sleeping task for the earliest deadline).
    func scheduleWake(_ at: Duration) {
        if let current = wakeAt, current <= at, wakeTask != nil { return }
        wakeTask?.cancel()
        wakeAt = at
        let delay = at - now()
        let sleep = self.sleep
        wakeTask = Task { [weak self] in
            await sleep(delay)
            guard !Task.isCancelled else { return }
            await self?.tick()
        }
    }

    func tick() async {
        wakeTask = nil
        wakeAt = nil
        let actions = machineEvent(.tick)
        _ = await perform(actions, server: server)
        if !actions.filter({ if case .wake = $0 { false } else { true } }).isEmpty { await publish() }
    }

    // MARK: Called by the delegate

    func controlPointWrite(_ value: [UInt8], cccdEnabled: Bool, server: GATTServer) async -> ATTErrorCode? {
        if mode == .application, watch == nil {
            return await applicationOutcome(application.controlPointWrite(value, cccdEnabled: cccdEnabled), server: server)
        }
        let refusal = await perform(machineEvent(.controlPointWrite(value, cccdEnabled: cccdEnabled)), server: server)
        await publish()
        return refusal
    }

    func packetWrite(_ value: [UInt8], withResponse: Bool, server: GATTServer) async -> ATTErrorCode? {
        if mode == .application, watch == nil {
            let notifying = await server.isNotifying(valueHandle: controlPoint ?? 0)
            return await applicationOutcome(application.packetWrite(value, cccdEnabled: notifying), server: server)
        }
        let refusal = await perform(machineEvent(.packetWrite(value, withResponse: withResponse)), server: server)
        // A status snapshot now and then during the data (the Control Point is quiet then).
        packetWrites += 1
        if packetWrites % 32 == 0 { await publish() }
        return refusal
    }

    func applicationOutcome(_ outcome: LegacyApplicationDFU.Outcome, server: GATTServer) async -> ATTErrorCode? {
        switch outcome {
        case .attError(let code): return code
        case .notify(let bytes):
            if let controlPoint { try? await server.notify(handle: controlPoint, value: bytes) }
        case .jump:
            // bootloader_start: peer data to the bootloader, GPREGRET 0xB1, jump; the link drops after the answer.
            peerData = profile.peerDataHandover
            jumpCentral = linkCentral
            mode = .bootloader
            bootloader.boot(at: now())
            if directedAdvertising { startDirectedTimer() }
            if let deadline = bootloader.nextWake { scheduleWake(deadline) }
            logger.debug("virtual legacy device jumps to the bootloader", metadata: ["sim.address": "\(currentAddress)"])
            await server.closeAfterResponse()
            await publish()
        case .nothing: break
        }
        return nil
    }

    nonisolated func pace(_ pdu: ATTPDU) async {
        let wait = pacer.cost(of: pdu, now: now())
        if wait > .zero { await sleep(wait) }
    }
}
