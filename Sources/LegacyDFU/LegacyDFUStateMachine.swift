import BLECore
import DFUPackage

/// One Legacy DFU attempt at one part over one connection to the bootloader, as a value: events in, actions out,
/// no I/O.
///
/// Flow (nRF5 SDK 11 `dfu_transport_ble.c`, legacy-dfu.md §3.3): Start DFU with the image type, the 12-byte sizes on
/// Packet → the device erases, then `10 01 01` → `02 00`, the init packet in 20-byte writes, `02 01` → `10 02 01` →
/// PRN request → Receive Firmware Image → windows of packets, each ending with the receipt of its last packet
/// (byte count checked) → `10 03 01` once the last byte is in flash → Report Received Image Size (count checked) →
/// Validate → `10 04 01` → Activate and Reset (the device disconnects and installs). A device older than SDK 7 (no
/// DFU Version characteristic) takes a bare `02` and a 2-byte CRC, and on SDK 6.0 `01` with the application size alone.
///
/// Legacy DFU cannot resume inside an image. When the device refuses a packet (`10 03 06`), takes fewer bytes than
/// were sent, fails validation, or is still busy with an earlier transfer (`10 01 02`), the engine resets it (`06`)
/// and fails with ``LegacyDFUError/Code/deviceReset``: the caller reconnects and runs the part again from zero, with
/// the pacing this attempt learned (``pacing``). A lost link fails with ``LegacyDFUError/Code/disconnected``, which
/// restarts from zero the same way. See docs/legacy-dfu.md.
public struct LegacyDFUStateMachine: Sendable {
    enum Step: Hashable, Sendable {
        case idle
        case starting(withoutType: Bool)
        case initializing(complete: Bool)
        case sendingData
        /// The receipt of the window's last packet; `late`: the receipt timeout passed and the device does not answer
        /// `07`, so the receipt is waited for until the response timeout.
        case waitingReceipt(late: Bool)
        case askingSize(final: Bool)
        case waitingLastPacket
        case validating
        case activating
        case finished
        case failed
    }

    public let part: LegacyPart
    public internal(set) var configuration: LegacyDFUConfiguration
    var step: Step = .idle
    var timer = LegacyTimer(id: 0)
    /// Firmware bytes written in this attempt.
    public internal(set) var sentOffset = 0
    /// Firmware bytes the device confirmed (receipt or size report).
    public internal(set) var confirmedOffset = 0
    /// The window being sent (packets), nil when streaming.
    var window: Int?
    /// A receipt that overtook our "packets written" event.
    var earlyReceipt: Int?
    var fellBackToStartWithoutType = false

    public init(part: LegacyPart, configuration: LegacyDFUConfiguration = LegacyDFUConfiguration()) {
        self.part = part
        self.configuration = configuration
    }

    /// The pacing policy as it stands now (a lost attempt slows it down: carry it into the next attempt).
    public var pacing: any LegacyPacingPolicy { configuration.pacing }
    public var isFinished: Bool { step == .finished || step == .failed }

    public mutating func handle(_ event: LegacyDFUEvent) -> [LegacyDFUAction] {
        guard !isFinished else { return [] }
        switch event {
        case .started:
            guard step == .idle else { return violation("started twice") }
            return start()
        case .notification(let bytes):
            let notification: LegacyNotification
            do {
                notification = try LegacyNotification(decoding: bytes)
            } catch {
                return violation("undecodable control point notification \(bytes.hexString): \(error)")
            }
            return received(notification)
        case .packetsSent:
            switch step {
            case .initializing(complete: false):
                return request(.initialize(.complete), .initializing(complete: true))
            case .sendingData: return windowWritten()
            default: return []
            }
        case .timerFired(let fired):
            guard fired == timer else { return [] }
            return timedOut()
        case .disconnected:
            if step == .activating {
                // The device reset to install the image (Activate and Reset was acknowledged).
                step = .finished
                return [.completed]
            }
            return fail(.disconnected, "link lost \(whereWeAre); Legacy DFU sends the image again from zero")
        case .requestNotAcknowledged:
            if step == .activating {
                return fail(
                    .activateUnconfirmed,
                    "link lost before the device acknowledged Activate and Reset for \(part.name): installed if it restarts into its application")
            }
            return fail(.disconnected, "link lost \(whereWeAre); Legacy DFU sends the image again from zero")
        case .cancelled:
            let failure = fail(.cancelled, "transfer cancelled \(whereWeAre)")
            return configuration.resetOnCancel ? [.writeControlPoint(.reset)] + failure : failure
        }
    }

    // MARK: - Start and init packet

    mutating func start() -> [LegacyDFUAction] {
        guard !part.image.isEmpty else { return fail(.incompatible, "part \(part.name) has an empty image") }
        // Everything the host can tell about the package is checked before Start: Start erases (the application
        // itself on a single bank), so a package refused after it would cost the device its application.
        if let refusal = preflight() { return fail(.incompatible, refusal) }
        step = .starting(withoutType: false)
        return [
            .writeControlPoint(.startDFU(part.imageType)), .writePacket(part.sizes.encoded), armTimer(configuration.eraseTimeout),
        ]
    }

    mutating func started(_ status: LegacyStatus) -> [LegacyDFUAction] {
        switch status {
        case .success: return sendInit()
        case .invalidState:
            // Nordic's hosts answer 10 01 02 with Reset and a new connection (iOS LegacyDFUService.sendStartDfu).
            return reset(Self.busyReason, status: status)
        case .notSupported where part.imageType == .application && configuration.deviceVersion == nil
            && !fellBackToStartWithoutType:
            // SDK 6.0 takes Start without a type and a 4-byte size (iOS LegacyDFUExecutor falls back the same way).
            fellBackToStartWithoutType = true
            step = .starting(withoutType: true)
            return [
                .writeControlPoint(.startDFUWithoutType), .writePacket(part.sizes.encodedApplicationOnly),
                armTimer(configuration.eraseTimeout),
            ]
        case .notSupported:
            return remote(
                status, .startDFU,
                "the device does not take a \(part.imageType) image of \(part.sizes) (sizes must be word-sized; an application is sent alone)")
        case .dataSizeExceedsLimit:
            return remote(
                status, .startDFU,
                "the \(part.name) image of \(part.image.count) bytes (\(part.sizes)) is larger than the device's bank or bootloader area")
        default: return remote(status, .startDFU, "")
        }
    }

    /// Why the engine resets a device that answers Start with "invalid state".
    public static let busyReason = "the device was still busy with an earlier transfer (Start DFU: invalid state)"

    mutating func sendInit() -> [LegacyDFUAction] {
        if configuration.deviceVersion == nil {
            // SDK <= 6.1: no DFU Version characteristic, an optional 2-byte CRC after a bare 02 (iOS sendInitPacket).
            if part.initPacket.isEmpty { return beginData() }
            step = .initializing(complete: true)
            return [
                .writeControlPoint(.initializeWithoutStep), .writePacket(part.initPacket), armTimer(configuration.responseTimeout),
            ]
        }
        step = .initializing(complete: false)
        // Each write is padded to a multiple of 4 by the device (init_data_process): 20-byte chunks keep it intact.
        let chunks = Self.packets(in: 0..<part.initPacket.count, size: min(configuration.packetSize, 20))
        return [.writeControlPoint(.initialize(.receive)), .sendPackets(LegacyPacketBurst(source: .initPacket, packets: chunks))]
    }

    /// Why the device cannot take this part, as far as the host can tell before Start DFU (nil: nothing known).
    /// An SDK <= 6.1 bootloader (no DFU Version) takes no init packet or a 2-byte CRC; DFU Version >= 0.5 requires
    /// the extended init packet (iOS: extendedInitPacketRequired); the Adafruit bootloader one for device type 0x0052.
    func preflight() -> String? {
        guard let version = configuration.deviceVersion else {
            guard part.initPacket.isEmpty || part.initPacket.count == 2 else {
                return "the device has no DFU Version characteristic (SDK <= 6.1) and takes a 2-byte CRC init packet only; \(part.name) has a \(part.initPacket.count)-byte extended init packet"
            }
            return nil
        }
        guard part.initPacket.count >= 14 else {
            return "the device (DFU Version \(version)) requires an extended init packet of at least 14 bytes; \(part.name) has \(part.initPacket.count)"
        }
        guard let required = configuration.requiredDeviceType else { return nil }
        let type = (try? LegacyInitPacket(decoding: part.initPacket))?.deviceType
        guard type == required else {
            let has = type.map { "is for device type 0x\(hex4($0))" } ?? "has no device type"
            return "\(part.name)'s init packet \(has); the Adafruit nRF52 bootloader takes device type 0x\(hex4(required)) only "
                + "(build the package with `bledfu package create --dev-type 0x\(hex4(required))`); nothing was sent, the application is kept"
        }
        return nil
    }

    mutating func initialized(_ status: LegacyStatus) -> [LegacyDFUAction] {
        switch status {
        case .success: return beginData()
        case .operationFailed:
            return remote(status, .initialize, "the device refused the init packet (\(initPacketSummary)); Adafruit bootloaders take device type 0x0052 only")
        default: return remote(status, .initialize, "")
        }
    }

    /// "device type 0xFFFF, revision 0xFFFF, SoftDevice [0xFFFE]".
    var initPacketSummary: String {
        guard let packet = try? LegacyInitPacket(decoding: part.initPacket), let type = packet.deviceType else {
            return "\(part.initPacket.count) bytes"
        }
        let sd = packet.softdeviceReq.map { "0x" + hex4($0) }.joined(separator: ", ")
        return "device type 0x\(hex4(type)), revision 0x\(hex4(packet.deviceRevision ?? 0)), SoftDevice [\(sd)]"
    }

    // MARK: - Helpers

    mutating func request(_ request: LegacyRequest, _ next: Step, timeout: Duration? = nil) -> [LegacyDFUAction] {
        step = next
        return [.writeControlPoint(request), armTimer(timeout ?? configuration.responseTimeout)]
    }

    mutating func armTimer(_ duration: Duration) -> LegacyDFUAction {
        timer = LegacyTimer(id: timer.id + 1)
        return .startTimer(timer, duration)
    }

    mutating func fail(_ code: LegacyDFUError.Code, _ reason: String) -> [LegacyDFUAction] {
        fail(LegacyDFUError(code, reason))
    }

    mutating func fail(_ error: LegacyDFUError) -> [LegacyDFUAction] {
        step = .failed
        return [.failed(error)]
    }

    mutating func violation(_ reason: String) -> [LegacyDFUAction] { fail(.protocolViolation, reason) }

    /// A refusal, named: "Start DFU (0x01) refused: data size exceeds limit (0x04): …".
    mutating func remote(_ status: LegacyStatus, _ request: LegacyOpcode, _ hint: String) -> [LegacyDFUAction] {
        let reason = "\(request) refused: \(status)" + (hint.isEmpty ? "" : ": " + hint)
        return fail(LegacyDFUError(.remote, reason, status: status, request: request))
    }

    /// Resets the device so that the part starts again from zero on a new connection.
    mutating func reset(_ reason: String, status: LegacyStatus? = nil, code: LegacyDFUError.Code = .deviceReset)
        -> [LegacyDFUAction]
    {
        step = .failed
        return [.writeControlPoint(.reset), .failed(LegacyDFUError(code, reason, status: status))]
    }

    var whereWeAre: String {
        switch step {
        case .idle, .starting: "before \(part.name) started"
        case .initializing: "while sending the init packet of \(part.name)"
        case .validating, .activating: "while validating \(part.name)"
        default: "after \(sentOffset) of \(part.image.count) bytes of \(part.name)"
        }
    }

    var progress: LegacyProgress {
        LegacyProgress(bytesConfirmed: confirmedOffset, bytesSent: sentOffset, totalBytes: part.image.count)
    }

    /// Packet ranges of at most `size` bytes covering `range`.
    static func packets(in range: Range<Int>, size: Int) -> [Range<Int>] {
        guard size > 0 else { return [] }
        return stride(from: range.lowerBound, to: range.upperBound, by: size).map { $0..<min($0 + size, range.upperBound) }
    }
}
