import ATT
import BLECore
import DFUPackage
import DFUProtocol
import Synchronization

/// The nRF5 SDK 15-17 Secure DFU bootloader (BLE transport), as a pure value: events in, actions out.
///
/// Faithful to `nrf_dfu_ble.c`, `nrf_dfu_req_handler.c`, `nrf_dfu_validation.c` and `nrf_dfu_ver_validation.c`
/// (secure-dfu-anchors.md §2). Responses are `60 <request opcode> <result> [payload]`; a result of 0x0B carries the
/// extended error in byte 3. Time is passed in with each event (device time), so flash timing is deterministic.
public struct BootloaderStateMachine: Sendable {
    public let profile: DeviceProfile
    /// Settings in RAM (`s_dfu_settings`).
    public internal(set) var settings = BootloaderSettings()
    /// Settings as last written to flash (what a disconnect or reset reloads).
    public internal(set) var persisted = BootloaderSettings()
    public internal(set) var flash: FlashModel
    public internal(set) var installed: InstalledImages
    public internal(set) var counters = DeviceCounters()
    /// `m_valid_init_cmd_present`.
    public internal(set) var initValid = false
    /// The PRN target (`m_pkt_notif_target`) and countdown.
    public internal(set) var prnTarget: UInt16 = 0
    var prnCountdown: UInt16 = 0
    /// `m_objtype`: the object type of the last Select or Create.
    public internal(set) var currentType: DFUObjectType?
    /// The device stopped answering (stall fault) until the link drops.
    public internal(set) var stalled = false
    /// The last Execute was answered and the device resets once its settings are written: requests go unanswered.
    public internal(set) var resetPending = false
    /// A `before-` fault that fired while the write was authorized, for the scheduler to carry out.
    var beforeTrigger: FaultTrigger?
    var faults: FaultInjector

    public init(profile: DeviceProfile, faults: FaultPlan = .none) {
        self.profile = profile
        self.installed = profile.installed
        self.flash = FlashModel(parameters: profile.flash, speedup: profile.speedup)
        self.flash.slowdown = faults.slowFlash
        self.faults = FaultInjector(plan: faults)
    }

    /// The last init command's announced firmware size (see ``announcedFirmwareSize(_:)``).
    let initSizeMemo = InitSizeMemo()

    /// Faults that fired, in order.
    public var faultLog: [FaultRecord] { faults.log }

    /// Whether a DFU is under way (a validated init command is stored in flash).
    public var updateInProgress: Bool { persisted.commandSize != 0 && decodedInit(persisted) != nil }

    /// Handles one event at device time `now`.
    public mutating func handle(_ event: BootloaderEvent, at now: Duration) -> [BootloaderAction] {
        flash.retire(now: now)
        switch event {
        case .controlPointWrite(let bytes, let cccdEnabled):
            if let refused = authorizeControlPoint(bytes, cccdEnabled: cccdEnabled, at: now) { return refused }
            return handleControlPoint(bytes, at: now)
        case .packetWrite(let bytes, let withResponse):
            // dfu_pkt_char_add: write without response only.
            if withResponse { return [.attError(.writeNotPermitted)] }
            if stalled { return [] }
            if faults.shouldDisconnect() { return fire(.disconnect, "disconnect-rate", now: now) }
            return packet(bytes, now: now)
        case .disconnected:
            // NRF_DFU_EVT_TRANSPORT_DEACTIVATED: SDK 16-17 reload the settings; SDK 15 keeps its RAM state. The PRN
            // target and countdown are statics of nrf_dfu_ble.c that only Set PRN and Create change: they stay.
            if profile.sdk.reloadsSettingsOnDisconnect { reloadSettings() }
            stalled = false
            return []
        case .powerLoss:
            flash.powerLoss(now: now)
            rebooted()
            return [.reboot(into: bootMode)]
        case .reset:
            flash.drain()
            rebooted()
            return [.reboot(into: bootMode)]
        }
    }

    /// The first half of a Control Point write, what the SoftDevice and `nrf_dfu_ble.c on_rw_authorize_req` do
    /// before the Write Response: nil when the write is accepted (answer it, then call ``handleControlPoint(_:at:)``),
    /// else what happens instead of the Write Response (the CCCD error; a link lost before the response, which loses
    /// the request). `controlPointWrite` events do both halves in one step.
    public mutating func authorizeControlPoint(_ bytes: [UInt8], cccdEnabled: Bool, at now: Duration)
        -> [BootloaderAction]?
    {
        flash.retire(now: now)
        // No notifications enabled → CCCD improperly configured, in the authorize reply.
        guard cccdEnabled else { return [.attError(.cccdImproperlyConfigured)] }
        counters.controlPointWrites += 1
        if stalled || resetPending { return nil }  // accepted; the scheduler never answers
        if faults.shouldDisconnect() { return fire(.disconnect, "disconnect-rate", now: now) }
        if let request = try? ControlPointRequest(decoding: bytes) {
            let trigger = faults.atStep(stepNames(for: request), after: false)
            if let trigger, trigger.action == .disconnect || trigger.action == .powerLoss {
                return fire(trigger, now: now)
            }
            beforeTrigger = trigger
        }
        return nil
    }

    /// The second half: the scheduler runs the accepted request (`nrf_dfu_req_handler_req_process`); its answer is
    /// a notification after the Write Response.
    public mutating func handleControlPoint(_ bytes: [UInt8], at now: Duration) -> [BootloaderAction] {
        flash.retire(now: now)
        if stalled || resetPending {
            beforeTrigger = nil
            return []
        }
        var actions: [BootloaderAction] = []
        controlPoint(bytes, now: now, into: &actions)
        return actions
    }

    /// A new connection started.
    public mutating func connected() {
        counters.connections += 1
    }

    /// The mode the device boots into after a reset that no buttonless jump asked for (power on, Abort, the end of an
    /// update): `nrf_bootloader.c dfu_enter_check` enters DFU only when the application is not valid (GPREGRET is
    /// clear, the buttonless flag unset). Dual bank keeps the old application valid through an update; single bank
    /// overwrites it, so an unfinished update keeps the device in the bootloader.
    public var bootMode: DeviceMode {
        if installed.application == nil { return .bootloader }
        return profile.flash.singleBank == true && updateInProgress ? .bootloader : .application
    }

    /// RAM after a reset: the settings from flash, the PRN statics at their initial values.
    mutating func rebooted() {
        reloadSettings()
        prnTarget = 0
        prnCountdown = 0
        stalled = false
        resetPending = false
    }

    /// `nrf_dfu_settings_reinit` + `nrf_dfu_validation_init`.
    mutating func reloadSettings() {
        settings = persisted
        initValid = settings.commandSize != 0 && decodedInit(settings) != nil
    }

    mutating func persist() { persisted = settings }

    /// `firmwareSize(settings)`, decoding each stored init command once: Create, Execute and its fault step names
    /// all ask, three protobuf decodes per data object otherwise.
    func announcedFirmwareSize(_ settings: BootloaderSettings) -> UInt32? {
        guard settings.commandSize != 0 else { return nil }
        return initSizeMemo.size(of: settings.initCommand) { firmwareSize(settings) }
    }

    // MARK: Control Point

    mutating func controlPoint(_ bytes: [UInt8], now: Duration, into actions: inout [BootloaderAction]) {
        guard let first = bytes.first else { return }
        let opcode = DFUOpcode(rawValue: first)
        let request: ControlPointRequest
        do {
            request = try ControlPointRequest(decoding: bytes)
        } catch {
            // A known opcode with the wrong length: the BLE transport cannot decode it.
            actions.append(.notify(response(opcode, .failure(.invalidParameter))))
            return
        }
        let steps = stepNames(for: request)
        let before = beforeTrigger
        beforeTrigger = nil
        if let trigger = before, trigger.action == .flashBusy {
            actions += fire(trigger, now: now)  // the request is still handled, behind a full queue
        } else if let trigger = before {
            if trigger.action == .reject {
                actions += fire(trigger, now: now)
                actions.append(.notify(response(opcode, rejection(trigger))))
                return
            }
            actions += fire(trigger, now: now)
            return
        }
        let handledFrom = actions.count
        switch request {
        case .create(let type, let size): create(type: type, size: size, now: now, into: &actions)
        case .setPRN(let value):
            prnTarget = value
            prnCountdown = value
            actions.append(.notify(response(opcode, .success)))
        case .calculateChecksum: checksum(into: &actions)
        case .execute: execute(now: now, into: &actions)
        case .select(let type): select(type, into: &actions)
        case .abort where profile.sdk.major < 15:
            // SDK 12-14 have no Abort: their request handler answers it as an unknown opcode and the bootloader stays.
            actions.append(.notify(response(opcode, .failure(.opCodeNotSupported))))
        case .abort:
            // SDK 15+ (NRF_DFU_OP_ABORT): bootloader_reset(true), no response, reset at once.
            flash.drain()
            rebooted()
            actions.append(.reboot(into: bootMode))
            return
        case .protocolVersion, .getMTU, .ping, .hardwareVersion, .firmwareVersion:
            // ble_dfu_req_handler_callback adds payloads only for Select, Write and CRC: a bare header over BLE.
            actions.append(
                .notify(response(opcode, profile.protocolReduced ? .failure(.opCodeNotSupported) : .success)))
        case .write, .unknown:
            actions.append(.notify(response(opcode, .failure(.opCodeNotSupported))))
        }
        if actions.count > handledFrom, actions.contains(where: { if case .reboot = $0 { true } else { false } }) {
            return
        }
        if let trigger = faults.atStep(steps, after: true) {
            if trigger.action != .reject { actions += fire(trigger, now: now) }
        }
    }

    /// The step names a request counts as, for fault triggers.
    func stepNames(for request: ControlPointRequest) -> [String] {
        switch request {
        case .select(let type): return [type == .command ? "select-command" : "select-data"]
        case .create(let type, _): return [type == .command ? "create-command" : "create-data"]
        case .setPRN: return ["set-prn"]
        case .calculateChecksum: return ["checksum"]
        case .abort: return ["abort"]
        case .execute:
            if currentType == .command { return ["execute-command"] }
            let finalObject =
                currentType == .data && announcedFirmwareSize(settings).map { settings.firmwareOffset == $0 } == true
            return finalObject ? ["execute-data", "final-execute"] : ["execute-data"]
        default: return [request.opcode.name?.lowercased().replacingSpaces ?? "unknown"]
        }
    }

    func response(_ opcode: DFUOpcode, _ status: DFUStatus, _ payload: [UInt8] = []) -> [UInt8] {
        ControlPointResponse(request: opcode, status: status, payload: payload).encoded
    }

    func rejection(_ trigger: FaultTrigger) -> DFUStatus {
        let result = DFUResultCode(rawValue: trigger.result ?? DFUResultCode.operationFailed.rawValue)
        if result == .extendedError { return .extended(DFUExtendedError(rawValue: trigger.extended ?? 0)) }
        return result == .success ? .success : .failure(result)
    }

    mutating func select(_ type: DFUObjectType, into actions: inout [BootloaderAction]) {
        switch type {
        case .command:
            currentType = type
            actions.append(
                .notify(
                    ControlPointResponse.select(
                        maxSize: UInt32(profile.commandObjectMaxSize), offset: settings.commandOffset,
                        crc: settings.commandCRC
                    ).encoded))
        case .data:
            currentType = type
            actions.append(
                .notify(
                    ControlPointResponse.select(
                        maxSize: UInt32(profile.dataObjectMaxSize), offset: settings.firmwareOffset,
                        crc: settings.firmwareCRC
                    ).encoded))
        default:
            currentType = nil
            actions.append(.notify(response(.select, .failure(.unsupportedType))))
        }
    }

    mutating func checksum(into actions: inout [BootloaderAction]) {
        switch currentType {
        case .command?:
            actions.append(
                .notify(ControlPointResponse.checksum(offset: settings.commandOffset, crc: settings.commandCRC).encoded)
            )
        case .data?:
            actions.append(
                .notify(
                    ControlPointResponse.checksum(offset: settings.firmwareOffset, crc: settings.firmwareCRC).encoded))
        default:
            actions.append(.notify(response(.calculateChecksum, .failure(.invalidObject))))
        }
    }

    /// Fires `trigger` (records it and returns its actions).
    mutating func fire(_ trigger: FaultTrigger, now: Duration) -> [BootloaderAction] {
        fire(trigger.action, trigger.label, now: now)
    }

    mutating func fire(_ action: FaultAction, _ label: String, now: Duration) -> [BootloaderAction] {
        faults.record(action.rawValue, label, bytes: counters.bytesReceived, at: now)
        counters.faultsFired += 1
        let record = BootloaderAction.fault(faults.log[faults.log.count - 1])
        switch action {
        case .disconnect: return [record, .disconnect]
        case .stall:
            stalled = true
            return [record]
        case .reject: return [record]
        case .flashBusy:
            flash.fill(now: now)
            return [record]
        case .powerLoss:
            flash.powerLoss(now: now)
            rebooted()
            return [record, .reboot(into: bootMode)]
        }
    }
}

extension String {
    var replacingSpaces: String { String(map { $0 == " " ? "-" : $0 }) }
}

/// Remembers the firmware size decoded from the last init command seen (a pure function of its bytes, so copies of
/// a state machine may share it).
final class InitSizeMemo: Sendable {
    private let last = Mutex<(command: [UInt8], size: UInt32?)?>(nil)

    func size(of command: [UInt8], decode: () -> UInt32?) -> UInt32? {
        if let known = last.withLock({ $0 }), known.command == command { return known.size }
        let size = decode()
        last.withLock { $0 = (command, size) }
        return size
    }
}
