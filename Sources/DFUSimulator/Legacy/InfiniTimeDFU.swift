import ATT
import BLECore
import LegacyDFU

/// The DFU service inside InfiniTime (`src/components/ble/DfuService.cpp`, PineTime), as a pure value.
///
/// Faithful to its quirks (legacy-dfu.md §11): only application images (Start with another type, or when not idle,
/// is ignored without an answer); the sizes are the first Packet write after Start (length unchecked) and trigger
/// a synchronous erase of 475 136 bytes of SPI NOR, then `10 01 01`; every Packet write in the Init state is parsed
/// from offset 0 (the CRC right after the SoftDevice list), so the init packet must come in one write; `02 01` is
/// answered `10 02 01` about 1 s later (`NotificationManager::AsyncSend`, timer of 1000 ticks at 1024 Hz), and a
/// second asynchronous answer while one is pending is dropped; the PRN request keeps the low byte only, and a value
/// of 0 sends no receipts (`x % 0` is `x` on a Cortex-M4 with DIV_0_TRP off); data is buffered by 200 bytes and
/// written to SPI NOR in the GATT callback; a write longer than 20 bytes trips `ASSERT(size <= 20)` and resets the
/// watch; `10 03 01` when the last byte is written; Validate computes the CRC-16 and answers after ≈ 1 s (a bad
/// CRC also resets the service); Activate resets the watch, whose MCUboot then runs the new image; unknown or
/// out-of-order requests get no answer (no Reset, no Report Received Image Size); any DFU access while an update
/// runs restarts a 10 000-tick (≈ 9.77 s) timer whose expiry resets the service. With "DFU and file system
/// access" disabled in the settings every DFU access gets ATT 0x08.
public struct InfiniTimeDFU: Sendable {
    public enum State: String, Codable, Sendable, Hashable {
        case idle, start, initialize = "init", data, validate, validated
    }

    /// `DfuImage::maxSize`: the SPI NOR area for the new firmware.
    public static let imageAreaSize = 475_136
    /// `DfuImage::bufferSize`.
    static let writeBufferSize = 200
    static let asyncDelayMicros = 1000.0 / 1024 * 1_000_000
    static let timeoutMicros = 10_000.0 / 1024 * 1_000_000

    public let profile: LegacyDeviceProfile
    public internal(set) var state = State.idle
    var packetsToNotify: UInt8 = 0
    var packetsReceived = 0
    public internal(set) var bytesReceived = 0
    public internal(set) var applicationSize = 0
    var expectedCRC: UInt16 = 0
    /// What the SPI NOR area holds (written part).
    var area: [UInt8] = []
    var buffered: [UInt8] = []
    /// `NotificationManager`: one pending asynchronous notification and when it goes out.
    var pending: (at: Duration, bytes: [UInt8])?
    var timeoutAt: Duration?
    public internal(set) var installed: InstalledImages
    public internal(set) var counters = LegacyDeviceCounters()
    /// The fault plan's byte-count triggers (`disconnect-after-bytes`, `power-loss-after-bytes`, on accepted image
    /// bytes); the watch has no bootloader steps to fault, and a Write Command is not lost on a link (no `drop-rate`).
    var faults: FaultInjector

    public init(profile: LegacyDeviceProfile, faults: FaultPlan = .none) {
        self.profile = profile
        self.faults = FaultInjector(plan: faults)
        installed = profile.installed
    }

    /// The faults that fired, for the status snapshot.
    public var faultLog: [FaultRecord] { faults.log }

    var updating: Bool { state != .idle }

    /// The actions of one event: notifications now, a wait (synchronous flash work), a wake-up for what is due
    /// later, or a reset of the watch (``LegacyBootloaderAction/reboot(into:)`` into the application).
    public mutating func handle(_ event: LegacyBootloaderEvent, at now: Duration) -> [LegacyBootloaderAction] {
        var actions = due(now)
        switch event {
        case .connected: counters.connections += 1
        case .disconnected, .tick: break
        case .powerLoss:
            reset()
            return [.reboot(into: .application)]
        case .controlPointWrite(let bytes, _):
            guard profile.dfuEnabled else { return actions + [.attError(.insufficientAuthorization)] }
            counters.controlPointWrites += 1
            if updating { timeoutAt = now + profile.timer(micros: Self.timeoutMicros) }
            actions += controlPoint(bytes, now: now)
        case .packetWrite(let bytes, _):
            guard profile.dfuEnabled else { return actions + [.attError(.insufficientAuthorization)] }
            if updating { timeoutAt = now + profile.timer(micros: Self.timeoutMicros) }
            actions += packet(bytes, now: now)
        }
        if let wake = [pending?.at, timeoutAt].compactMap({ $0 }).min(), !actions.contains(where: \.isReboot) {
            actions.append(.wake(at: wake))
        }
        return actions
    }

    /// The asynchronous notification and the timeout, when due.
    mutating func due(_ now: Duration) -> [LegacyBootloaderAction] {
        var actions: [LegacyBootloaderAction] = []
        if let send = pending, send.at <= now {
            pending = nil
            actions.append(.notify(send.bytes))
        }
        if let deadline = timeoutAt, deadline <= now {
            reset()  // DfuService::OnTimeout
        }
        return actions
    }

    mutating func asyncSend(_ bytes: [UInt8], now: Duration) {
        guard pending == nil else { return }  // AsyncSend returns false while one is pending
        pending = (now + profile.scaled(micros: Self.asyncDelayMicros), bytes)
    }

    /// DfuService::Reset: the service, not the watch.
    mutating func reset() {
        state = .idle
        packetsToNotify = 0
        packetsReceived = 0
        bytesReceived = 0
        applicationSize = 0
        expectedCRC = 0
        pending = nil
        timeoutAt = nil
        buffered = []
    }

    // MARK: ControlPointHandler

    mutating func controlPoint(_ bytes: [UInt8], now: Duration) -> [LegacyBootloaderAction] {
        let argument = bytes.count > 1 ? bytes[1] : 0
        switch LegacyOpcode(rawValue: bytes.first ?? 0) {
        case .startDFU:
            guard state == .idle, argument == LegacyImageType.application.rawValue else { return [] }
            state = .start
            timeoutAt = now + profile.timer(micros: Self.timeoutMicros)
        case .initialize:
            guard state == .initialize, argument != 0 else { return [] }
            asyncSend(LegacyNotification.response(request: .initialize, status: .success).encoded, now: now)
        case .packetReceiptRequest: packetsToNotify = argument
        case .receiveFirmwareImage:
            guard state == .initialize else { return [] }
            area = []
            buffered = []
            state = .data
        case .validate:
            guard state == .validate else { return [] }
            let good = CRC16.ccittFalse(area.prefix(applicationSize)) == expectedCRC
            let status: LegacyStatus = good ? .success : .crcError
            asyncSend(LegacyNotification.response(request: .validate, status: status).encoded, now: now)
            if good {
                state = .validated
            } else {
                let answer = pending
                reset()
                pending = answer
            }
        case .activateAndReset:
            guard state == .validated else { return [] }
            // The system task resets the watch; MCUboot swaps in the image (the magic trailer asks for a test swap).
            let image = Array(area.prefix(applicationSize))
            installed.application = InstalledImage(
                version: (installed.application?.version ?? 0) + 1, size: UInt32(image.count),
                sha256: ImageDigest.sha256Hex(image))
            counters.updatesCompleted += 1
            reset()
            return [.reboot(into: .application)]
        default: break
        }
        return []
    }

    // MARK: WritePacketHandler

    mutating func packet(_ bytes: [UInt8], now: Duration) -> [LegacyBootloaderAction] {
        counters.packetsReceived += 1
        func u16(_ at: Int) -> UInt16 { UInt16(byte(bytes, at)) | UInt16(byte(bytes, at + 1)) << 8 }
        func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) | UInt32(u16(at + 2)) << 16 }
        switch state {
        case .start:
            applicationSize = Int(u32(8))
            let sectors = Self.imageAreaSize / max(profile.flash.pageSize, 1)
            let erase = profile.scaled(micros: Double(sectors) * profile.flash.pageEraseMicros)
            state = .initialize
            return [.wait(erase), .notify(LegacyNotification.response(request: .startDFU, status: .success).encoded)]
        case .initialize:
            // Parsed from offset 0 of every write: the CRC follows the SoftDevice list of this write.
            let count = Int(u16(8))
            expectedCRC = u16(10 + 2 * count)
            return []
        case .data:
            guard bytes.count <= 20 else {
                // ASSERT(size <= 20) in DfuImage::Append: the watch resets; the old firmware runs again.
                reset()
                return [.reboot(into: .application)]
            }
            packetsReceived += 1
            counters.bytesReceived += UInt64(bytes.count)
            if let trigger = faults.afterBytes(counters.bytesReceived), trigger.action == .disconnect || trigger.action == .powerLoss {
                faults.record(trigger.action.rawValue, trigger.label, bytes: counters.bytesReceived, at: now)
                counters.faultsFired += 1
                let record = LegacyBootloaderAction.fault(faults.log[faults.log.count - 1])
                // The packet is lost with the link (disconnect: the service keeps its state; power loss: the watch
                // resets and the old firmware runs again).
                if trigger.action == .disconnect { return [record, .disconnect] }
                reset()
                return [record, .reboot(into: .application)]
            }
            let written = append(bytes)
            bytesReceived += bytes.count
            var actions: [LegacyBootloaderAction] = []
            if written > 0 { actions.append(.wait(profile.scaled(micros: Double((written + 3) / 4) * profile.flash.wordWriteMicros))) }
            if packetsToNotify != 0, packetsReceived % Int(packetsToNotify) == 0, bytesReceived != applicationSize {
                counters.prnsSent += 1
                actions.append(.notify(LegacyNotification.packetReceipt(bytesReceived: UInt32(truncatingIfNeeded: bytesReceived)).encoded))
            }
            if area.count >= applicationSize {
                state = .validate
                actions.append(.notify(LegacyNotification.response(request: .receiveFirmwareImage, status: .success).encoded))
            }
            return actions
        default: return []
        }
    }

    /// DfuImage::Append: 200-byte buffer, written to SPI NOR when full and at the end. Returns the bytes written now.
    mutating func append(_ bytes: [UInt8]) -> Int {
        buffered += bytes
        var written = 0
        if buffered.count >= Self.writeBufferSize || area.count + buffered.count >= applicationSize {
            written = buffered.count
            area += buffered
            buffered = []
        }
        return written
    }

    func byte(_ bytes: [UInt8], _ index: Int) -> UInt8 { index < bytes.count ? bytes[index] : 0 }
}
