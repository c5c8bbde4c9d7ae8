import ATT
import BLECore
import DFUProtocol
import GATT
import Logging
import Synchronization

/// A virtual nRF5 device: application with a buttonless DFU characteristic, or the Secure DFU bootloader.
///
/// It keeps its profile, flash, bootloader settings and installed images across connections and resets for as long
/// as it lives. `serve(_:)` runs one connection (the GATT server of the current mode) until the link ends; the
/// caller (the CLI, a test) accepts connections and calls it again, reading `currentAdvertisement` in between
/// because the address and name change on the jump to the bootloader. The device never touches files or sockets:
/// `statusSink` receives state snapshots, the caller writes them.
public actor VirtualDevice {
    public nonisolated let profile: DeviceProfile
    public private(set) var mode: DeviceMode
    var bootloader: BootloaderStateMachine
    var buttonless: ButtonlessLogic
    var connected = false
    var counter: UInt32 = 0
    let link: LinkModel
    let now: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async -> Void
    let makeServer: @Sendable (GATTDatabase, any ATTBearer, UInt16) -> GATTServer
    let statusSink: (@Sendable (DeviceState) async -> Void)?
    let persistentSink: (@Sendable (DevicePersistentState) async -> Void)?
    let logger: Logger
    /// The air of the central adapters (nil: every link has the air to itself).
    let sharedAir: SharedAir?
    /// The link model's state, kept apart from the actor so that pacing a PDU needs no hop onto the device.
    private struct LinkState {
        /// When the modelled link is free for the next PDU.
        var freeAt: Duration = .zero
        /// `link.writeCommandMicros(attBytes:)` by PDU size: the model simulates a thousand connection events per
        /// call, and a transfer asks for the same one or two sizes thousands of times.
        var writeCommandMicrosBySize: [Int: Double] = [:]
        /// The current link's place on its central adapter's controller.
        var seat: SharedAir.Seat?
    }

    private nonisolated let linkState = Mutex(LinkState())

    /// - Parameters:
    ///   - clock: device time and the pacing delays run on it (a `ManualClock` in tests).
    ///   - statusSink: receives a snapshot after every control point write and link event.
    ///   - restoring: flash and settings kept from an earlier run (`persistentState()`), loaded as after a power cycle.
    ///   - persistentSink: receives `persistentState()` whenever `statusSink` receives a snapshot.
    ///   - sharedAir: where links from one central adapter share its controller's air (`bledfu simulate`).
    public init<C: Clock<Duration>>(
        profile: DeviceProfile, faults: FaultPlan = .none, clock: C,
        statusSink: (@Sendable (DeviceState) async -> Void)? = nil,
        restoring: DevicePersistentState? = nil,
        persistentSink: (@Sendable (DevicePersistentState) async -> Void)? = nil,
        logger: Logger = Logger(label: "bledfu.simulator"), sharedAir: SharedAir? = nil
    ) {
        self.profile = profile
        self.sharedAir = sharedAir
        self.bootloader = BootloaderStateMachine(profile: profile, faults: faults)
        self.buttonless = ButtonlessLogic(kind: profile.buttonless)
        self.mode = profile.installed.application == nil ? .bootloader : .application
        self.link = LinkModel(profile: profile)
        let start = clock.now
        self.now = { start.duration(to: clock.now) }
        self.sleep = { duration in
            guard duration > .zero else { return }
            // Cancellation ends the wait early; the device then simply goes on (the link is closing anyway).
            try? await clock.sleep(for: duration)
        }
        self.makeServer = { database, bearer, mtu in
            GATTServer(database: database, bearer: bearer, maximumMTU: mtu, clock: clock)
        }
        self.statusSink = statusSink
        self.persistentSink = persistentSink
        self.logger = logger
        if let restoring {
            bootloader.restore(installed: restoring.installed, settings: restoring.settings, bank: restoring.bank)
            mode = Self.restoredMode(restoring)
            buttonless.advertisingName = mode == .bootloader ? restoring.advertisingName : nil
        }
    }

    /// What survives a power cycle: installed images, the settings page, the bank, the mode, the bootloader name.
    public func persistentState() -> DevicePersistentState {
        let flash = bootloader.persistentSnapshot
        return DevicePersistentState(
            mode: mode, installed: flash.installed, settings: flash.settings, bank: flash.bank,
            advertisingName: mode == .bootloader ? buttonless.advertisingName : nil)
    }

    /// Loads `state` as after a power cycle (RAM state, the current object and the PRN target, starts afresh).
    public func restore(_ state: DevicePersistentState) async {
        load(state)
        await publish()
    }

    private func load(_ state: DevicePersistentState) {
        bootloader.restore(installed: state.installed, settings: state.settings, bank: state.bank)
        mode = Self.restoredMode(state)
        buttonless.advertisingName = mode == .bootloader ? state.advertisingName : nil
    }

    /// Without an application the device can only boot into the bootloader.
    private static func restoredMode(_ state: DevicePersistentState) -> DeviceMode {
        state.installed.application == nil ? .bootloader : state.mode
    }

    /// The address the device advertises in its current mode: the bootloader without bonds uses address + 1
    /// (`gap_address_change`: LSB incremented, no carry).
    public var currentAddress: BluetoothAddress {
        if mode == .bootloader, profile.buttonless != .bonded {
            return profile.address.nordicBootloaderAddress
        }
        return profile.address
    }

    /// The name the device advertises in its current mode.
    public var currentName: String {
        mode == .application ? profile.name : (buttonless.advertisingName ?? bootloaderDefaultName)
    }

    /// The advertisement of the current mode: flags 0x06, FE59 in the 16-bit UUID list (bootloader, or an app with
    /// buttonless DFU), complete local name.
    public var currentAdvertisement: Advertisement {
        let services = mode == .bootloader || profile.buttonless != .none ? [profile.dfuUUIDs.service] : []
        let data = AdvertisingData.build(flags: 0x06, name: currentName, services: services)
        return Advertisement(peer: PeerAddress(currentAddress, type: profile.addressType), rssi: -50, data: data)
    }

    /// A snapshot of everything observable.
    public func state() -> DeviceState {
        DeviceState(
            mode: mode, address: currentAddress.description, addressType: profile.addressType, name: currentName,
            installed: bootloader.installed, settings: bootloader.settingsSnapshot, counters: bootloader.counters,
            faults: bootloader.faultLog, connected: connected)
    }

    /// Serves one connection on `bearer` until the link ends.
    public func serve(_ bearer: any ATTBearer) async {
        connected = true
        bootloader.connected()
        let connectedAt = now()
        // A link from a named central adapter shares that adapter's air with its other links.
        let seat = bearer.linkInfo.centralAdapter.flatMap { adapter in sharedAir?.join(adapter: adapter, model: link) }
        linkState.withLock { state in
            state.freeAt = connectedAt
            state.seat = seat
        }
        defer {
            linkState.withLock { $0.seat = nil }
            if let seat { sharedAir?.leave(seat) }
        }
        let servedMode = mode
        let database: GATTDatabase
        switch servedMode {
        case .application:
            database = DeviceDatabases.application(
                profile: profile, name: profile.name, firmwareRevision: firmwareRevision)
        case .bootloader:
            database = DeviceDatabases.bootloader(
                name: currentName, requiresBonds: profile.requiresBonds, uuids: profile.dfuUUIDs)
        }
        let server = makeServer(database, bearer, UInt16(clamping: max(profile.link.maxMTU, 23)))
        let delegate = DeviceDelegate(device: self, database: database, mode: servedMode)
        await server.setDelegate(delegate)
        logger.debug("virtual device connected", metadata: ["sim.mode": "\(servedMode)"])
        await publish()
        let reason = await server.run()
        logger.debug("virtual device link ended", metadata: ["sim.reason": "\(reason)"])
        await delegate.pendingReset()
        if servedMode == .bootloader, mode == .bootloader, !delegate.rebooted {
            _ = bootloader.handle(.disconnected, at: now())
        }
        connected = false
        await publish()
    }

    /// "1" for application version 1: the Device Information Firmware Revision string.
    public var firmwareRevision: String { String(bootloader.installed.application?.version ?? 0) }

    /// Power loss now (also while no connection is served).
    public func powerLoss() async {
        for action in bootloader.handle(.powerLoss, at: now()) {
            if case .reboot(let into) = action { mode = into }
        }
        await publish()
    }

    func publish() async {
        await statusSink?(state())
        if let persistentSink { await persistentSink(persistentState()) }
    }

    // MARK: Called by the delegate

    /// Waits until the modelled link has carried `pdu`. Nonisolated: the link model has its own lock, and a PDU
    /// that needs no wait (an unthrottled link) costs no hop onto the device.
    nonisolated func pace(_ pdu: ATTPDU) async {
        let attBytes: Int?
        switch pdu {
        case .writeCommand(_, let value): attBytes = 3 + value.count
        case .writeRequest, .readRequest, .readBlobRequest, .readByTypeRequest, .readByGroupTypeRequest,
            .findInformationRequest, .findByTypeValueRequest, .exchangeMTURequest:
            attBytes = nil
        default: attBytes = pdu.encoded.count
        }
        let current = now()
        let wait = linkState.withLock { state -> Duration in
            var micros: Double
            if let attBytes {
                if let known = state.writeCommandMicrosBySize[attBytes] {
                    micros = known
                } else {
                    micros = link.writeCommandMicros(attBytes: attBytes)
                    state.writeCommandMicrosBySize[attBytes] = micros
                }
                // Sharing the central's air: the link carries its PDUs at the speed the controller gives it.
                if let seat = state.seat, let air = sharedAir { micros /= air.speed(seat) }
            } else {
                micros = link.requestRoundTripMicros
            }
            let start = max(current, state.freeAt)
            state.freeAt = start + profile.scaled(micros: micros)
            return state.freeAt - current
        }
        if wait > .zero { await sleep(wait) }
    }

    func bootloaderEvent(_ event: BootloaderEvent) -> [BootloaderAction] {
        bootloader.handle(event, at: now())
    }

    func authorizeControlPoint(_ bytes: [UInt8], cccdEnabled: Bool) -> [BootloaderAction]? {
        bootloader.authorizeControlPoint(bytes, cccdEnabled: cccdEnabled, at: now())
    }

    func handleControlPoint(_ bytes: [UInt8]) -> [BootloaderAction] {
        bootloader.handleControlPoint(bytes, at: now())
    }

    func applyReboot(_ into: DeviceMode) {
        bootloader.rebooted()
        mode = into
        if into == .application { buttonless.advertisingName = nil }
    }

    func buttonlessWrite(_ value: [UInt8], indicationsEnabled: Bool) -> ButtonlessLogic.Outcome {
        buttonless.write(value, indicationsEnabled: indicationsEnabled)
    }

    /// The buttonless jump, once the `20 01 01` indication was confirmed.
    func enterBootloader() async {
        mode = .bootloader
        logger.debug("virtual device jumps to the bootloader", metadata: ["sim.address": "\(currentAddress)"])
    }

    func nextCounter() -> UInt32 {
        counter &+= 1
        return counter
    }
}
