import ATT
import BLECore
import LegacyDFU

/// The nRF5 SDK ≤ 11 BLE bootloader (and Adafruit's modified copy, and the SDK ≤ 6.1 protocol), as a pure value:
/// events in, actions out, time passed in.
///
/// Two halves as in the SDK: the BLE transport (`dfu_transport_ble.c` + `ble_dfu.c`: what the Packet
/// characteristic currently carries, the PRN counter, the byte counter, RX buffers) and the bank module
/// (`dfu_dual_bank.c` / `dfu_single_bank.c`: state, start packet, init packet, data counter, flash through the
/// pstorage queue, validation, activation). Flash operations complete at their modelled times; the answers that
/// wait for them (`10 01 01` after the erase, `10 03 01` after the last write) go out on the ``LegacyBootloaderEvent/tick``
/// the machine asks for with ``LegacyBootloaderAction/wake(at:)``. Sources and the behaviour per event are in
/// docs/simulator.md ("Legacy DFU devices") and legacy-dfu.md §3–§10.
public struct LegacyBootloader: Sendable {
    public let profile: LegacyDeviceProfile
    // Transport.
    var packetType: LegacyPacketType = .invalid
    var updateMode: UInt8 = 0
    /// `m_num_of_firmware_bytes_rcvd`: bytes accepted in this bootloader session (never reset before a reset).
    public internal(set) var bytesAccepted: UInt32 = 0
    var prnEnabled = false
    public internal(set) var prnTarget: UInt16 = 0
    var prnCountdown: UInt16 = 0
    /// When the write of the last packet completes (`mp_final_packet`): then `10 03 01`.
    var finalAnswerAt: Duration?
    // Bank module.
    public internal(set) var state: LegacyBankState = .idle
    public internal(set) var startSizes = LegacyStartSizes()
    var imageSize: UInt32 = 0
    /// `m_data_received`; 0xFFFFFFFF after data beyond the announced size (every later write is refused).
    public internal(set) var dataReceived: UInt32 = 0
    public internal(set) var initPacket: [UInt8] = []
    /// When the Start erase completes: then `10 01 01`.
    var eraseDoneAt: Duration?
    /// The erase under way clears bank 0 (single bank, or a SoftDevice update).
    var erasingBank0 = false
    /// The DFU inactivity timer (`dfu_timer_restart`), nil when stopped.
    var timerDeadline: Duration?
    public internal(set) var flash: FlashModel
    var connected = false
    /// The device stopped answering (stall fault) until the link drops.
    public internal(set) var stalled = false
    // What survives a reset.
    public internal(set) var installed: InstalledImages
    public internal(set) var bank0: LegacyBankCode
    public internal(set) var softDeviceFWID: UInt16
    public internal(set) var applicationStart: Int
    public internal(set) var counters = LegacyDeviceCounters()
    var faults: FaultInjector

    public init(profile: LegacyDeviceProfile, faults: FaultPlan = .none) {
        self.profile = profile
        installed = profile.installed
        bank0 = profile.installed.application == nil ? .invalid : .validApp
        softDeviceFWID = profile.softDeviceFWID
        applicationStart = profile.applicationStart
        flash = FlashModel(parameters: profile.flash, speedup: profile.speedup)
        flash.slowdown = faults.slowFlash
        self.faults = FaultInjector(plan: faults)
    }

    /// Faults that fired, in order.
    public var faultLog: [FaultRecord] { faults.log }

    /// `bootloader_app_is_valid`: bank 0 flagged valid (SDK 11 never stores a real image CRC, so none is checked).
    public var applicationValid: Bool { bank0 == .validApp && installed.application != nil }

    /// The bootloader starts (`dfu_init`): RAM state afresh, the DFU timer running (`timer` false: the chip boots
    /// its application instead, and the bootloader's RAM state is gone).
    public mutating func boot(at now: Duration, timer: Bool = true) {
        packetType = .invalid
        updateMode = 0
        bytesAccepted = 0
        prnEnabled = false
        prnTarget = 0
        prnCountdown = 0
        finalAnswerAt = nil
        state = .idle
        startSizes = LegacyStartSizes()
        imageSize = 0
        dataReceived = 0
        initPacket = []
        eraseDoneAt = nil
        flash.powerLoss(now: now)
        timerDeadline = timer ? now + profile.inactivityTimeout : nil
    }

    public mutating func handle(_ event: LegacyBootloaderEvent, at now: Duration) -> [LegacyBootloaderAction] {
        var actions = retire(now)
        if actions.contains(where: \.isReboot) { return actions }
        switch event {
        case .connected:
            connected = true
            counters.connections += 1
        case .disconnected:
            // on_ble_evt DISCONNECTED: advertising again; the DFU state is kept.
            connected = false
            stalled = false
        case .tick: break
        case .powerLoss:
            flash.powerLoss(now: now)
            return actions + [.reboot(into: bootTarget)]
        case .controlPointWrite(let bytes, let cccdEnabled):
            // ble_dfu.c on_rw_authorize_req: notifications off → CCCD improperly configured.
            guard cccdEnabled else { return actions + [.attError(.cccdImproperlyConfigured)] }
            counters.controlPointWrites += 1
            if faults.shouldDisconnect() { return actions + fire(.disconnect, "disconnect-rate", now: now) }
            actions += controlPoint(bytes, now: now)
        case .packetWrite(let bytes, let withResponse):
            if withResponse, profile.kind != .adafruit { return actions + [.attError(.writeNotPermitted)] }
            if faults.shouldDisconnect() { return actions + fire(.disconnect, "disconnect-rate", now: now) }
            actions += packet(bytes, now: now)
        }
        if stalled { actions.removeAll { if case .notify = $0 { true } else { false } } }
        if !actions.contains(where: \.isReboot), let wake = nextWake { actions.append(.wake(at: wake)) }
        return actions
    }

    /// The earliest pending deadline (an answer waiting for flash, the inactivity timer).
    var nextWake: Duration? { [eraseDoneAt, finalAnswerAt, timerDeadline].compactMap { $0 }.min() }

    /// Completes what is due by `now`: the Start erase, the last write, the inactivity timer.
    mutating func retire(_ now: Duration) -> [LegacyBootloaderAction] {
        flash.retire(now: now)
        var actions: [LegacyBootloaderAction] = []
        if let due = eraseDoneAt, due <= now {
            eraseDoneAt = nil
            actions += eraseCompleted()
        }
        if let due = finalAnswerAt, due <= now {
            finalAnswerAt = nil
            // dfu_cb_handler: the final packet's write completed → 10 03 01.
            actions += respond(.receiveFirmwareImage, .success)
        }
        if let deadline = timerDeadline, deadline <= now, !actions.contains(where: \.isReboot) {
            // dfu_timeout_handler → DFU_TIMEOUT: the transport closes the link and the bootloader exits.
            timerDeadline = nil
            actions.append(.reboot(into: bootTarget))
        }
        return actions
    }

    /// A response notification; without a connection `ble_dfu_response_send` fails and APP_ERROR_CHECK resets the
    /// chip (legacy-dfu.md §3.2, outcome inferred).
    mutating func respond(_ request: LegacyOpcode, _ status: LegacyStatus) -> [LegacyBootloaderAction] {
        let bytes = LegacyNotification.response(request: request, status: status).encoded
        guard connected else { return [.reboot(into: bootTarget)] }
        return [.notify(bytes)]
    }

    mutating func restartTimer(_ now: Duration) { timerDeadline = now + profile.inactivityTimeout }

    // MARK: Control Point (ble_dfu.c on_ctrl_pt_write, dfu_transport_ble.c on_dfu_evt)

    mutating func controlPoint(_ bytes: [UInt8], now: Duration) -> [LegacyBootloaderAction] {
        guard let first = bytes.first else { return [] }
        let opcode = LegacyOpcode(rawValue: first)
        let preVersion = profile.kind == .sdk6
        if let trigger = faults.atStep(stepNames(bytes), after: false) {
            if trigger.action == .reject {
                let status = LegacyStatus(rawValue: trigger.result ?? LegacyStatus.operationFailed.rawValue)
                return fire(trigger, now: now) + respond(opcode, status)
            }
            return fire(trigger, now: now)
        }
        var actions: [LegacyBootloaderAction] = []
        switch opcode {
        case .startDFU:
            if bytes.count < 2, !preVersion { return respond(opcode, .operationFailed) }
            packetType = .start
            updateMode = bytes.count >= 2 ? bytes[1] : LegacyImageType.application.rawValue
        case .initialize:
            if bytes.count < 2, !preVersion { return respond(opcode, .operationFailed) }
            packetType = .initPacket
            if !preVersion, bytes[1] == LegacyInitStep.complete.rawValue {
                actions += respond(.initialize, initComplete())
            }
        case .receiveFirmwareImage: packetType = .firmwareData
        case .validate: actions += respond(.validate, validate(now: now))
        case .activateAndReset: return activate(now: now)
        case .reset: return reset()
        case .reportReceivedImageSize:
            guard connected else { return [.reboot(into: bootTarget)] }
            actions.append(.notify(LegacyNotification.receivedImageSize(bytesAccepted).encoded))
        case .packetReceiptRequest:
            guard bytes.count >= 3 else { return respond(opcode, .notSupported) }
            let n = UInt16(bytes[1]) | UInt16(bytes[2]) << 8
            prnEnabled = n > 0
            prnTarget = n
            prnCountdown = n
        default:
            return respond(opcode, .notSupported)
        }
        if !actions.contains(where: \.isReboot), let trigger = faults.atStep(stepNames(bytes), after: true),
            trigger.action != .reject
        {
            actions += fire(trigger, now: now)
        }
        return actions
    }

    /// The step names a Control Point write counts as, for fault triggers.
    func stepNames(_ bytes: [UInt8]) -> [String] {
        switch bytes.first {
        case 0x01: ["start"]
        case 0x02: bytes.count >= 2 && bytes[1] == 0x01 ? ["init-complete"] : ["init"]
        case 0x03: ["receive"]
        case 0x04: ["validate"]
        case 0x05: ["activate"]
        case 0x06: ["reset"]
        case 0x07: ["report-size"]
        case 0x08: ["prn-request"]
        default: ["unknown"]
        }
    }

    /// Fires `trigger` (records it and returns its actions).
    mutating func fire(_ trigger: FaultTrigger, now: Duration) -> [LegacyBootloaderAction] {
        fire(trigger.action, trigger.label, now: now)
    }

    mutating func fire(_ action: FaultAction, _ label: String, now: Duration) -> [LegacyBootloaderAction] {
        faults.record(action.rawValue, label, bytes: counters.bytesReceived, at: now)
        counters.faultsFired += 1
        let record = LegacyBootloaderAction.fault(faults.log[faults.log.count - 1])
        switch action {
        case .disconnect: return [record, .disconnect]
        case .stall:
            // Stop answering (notifications) until the link drops.
            stalled = true
            return [record]
        case .reject: return [record]
        case .flashBusy:
            // Another module's operations fill the pstorage queue: a Start that follows cannot queue its erase,
            // and data writes are dropped until it drains.
            flash.fill(now: now)
            return [record]
        case .powerLoss:
            flash.powerLoss(now: now)
            return [record, .reboot(into: bootTarget)]
        }
    }
}

extension LegacyBootloaderAction {
    var isReboot: Bool { if case .reboot = self { true } else { false } }
}
