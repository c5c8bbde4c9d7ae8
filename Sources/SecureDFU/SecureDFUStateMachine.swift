import BLECore
import DFUProtocol

/// The Secure DFU transfer of one part over one connection, as a value: events in, actions out, no I/O.
///
/// Flow (secure-dfu-anchors.md 2.7): Select Command → resume decision → [Create Command → PRN 0 → init
/// packet → Calculate Checksum] → Execute → Set PRN (policy) → Select Data → resume decision → for each
/// object: Create → bursts with checkpoints (offset *and* CRC checked at each) → checksum at the object end →
/// Execute. The last Execute makes the device reset, so a disconnect after it is success. See docs/engine.md.
public struct SecureDFUStateMachine: Sendable {
    enum Step: Hashable, Sendable {
        case idle
        case selectCommand
        case createCommand
        case setPRNForInit
        case sendingInit
        case checksumInit
        case executeCommand(again: Bool)
        case setPRNForData(thenSelect: Bool)
        case selectData
        case createData
        case pause
        /// Waiting before a retry (``StallBudget``): then stream on, or create the object again.
        case retryWait(RetryAfterWait)
        case sendingData(PacingBurst)
        case waitingReceipt
        case checksumData
        case executeData(again: Bool)
        case finished
        case failed
    }

    /// What a retry wait ends with.
    enum RetryAfterWait: Hashable, Sendable {
        case stream
        case create
    }

    public let part: DFUPart
    public internal(set) var configuration: SecureDFUConfiguration
    let image: PrefixCRC
    let initCRC: PrefixCRC
    var step: Step = .idle
    var timer = DFUTimer(id: 0)
    var packetSize = 20
    var objects: [Range<Int>] = []
    var objectIndex = 0
    /// Next byte to send (in the init packet or the image).
    var sentOffset = 0
    var burstEnd = 0
    var configuredPRN: UInt16 = 0
    var packetsSinceReceiptReset = 0
    var needsPRNResync = false
    var earlyReport: (offset: Int, crc: UInt32)?
    var failures = 0
    var slowedDown = false
    /// Whether a failed data checkpoint since the last slow-down found packets lost (the device had fewer bytes than
    /// were sent): see `countFailure`.
    var lossInARow = false
    var restartedFromScratch = false
    /// Checkpoint timeouts since the device last said anything (two in a row: it stopped answering).
    var silentTimeouts = 0
    /// When to give up: no progress for a while, in time and tries (issue 18 point 1).
    var stall: StallBudget
    /// ``DFUEvent/stopRequested`` arrived: end the run at the next safe point.
    public internal(set) var stopRequested = false
    public internal(set) var retries = 0
    public internal(set) var bytesResent = 0

    public init(part: DFUPart, configuration: SecureDFUConfiguration = SecureDFUConfiguration()) {
        self.part = part
        self.configuration = configuration
        self.image = PrefixCRC(part.image)
        self.initCRC = PrefixCRC(part.initPacket, stride: 64)
        self.stall = StallBudget(limit: configuration.stallTimeout, minimumTries: 2 * configuration.maxAttempts)
    }

    /// The pacing policy as it stands now (it adapts during the transfer).
    public var pacing: any PacingPolicy { configuration.pacing }
    public var isFinished: Bool { step == .finished || step == .failed }

    public mutating func handle(_ event: DFUEvent) -> [DFUAction] {
        guard !isFinished else { return [] }
        switch event {
        case .started(let mtu):
            guard step == .idle else { return violation("started twice") }
            guard let size = DFUPlanning.packetSize(mtu: mtu) else {
                return violation("ATT_MTU \(mtu) is below the minimum \(DFUPlanning.minimumMTU)")
            }
            guard !part.initPacket.isEmpty, !part.image.isEmpty else {
                return fail(DFUEngineError(.incompatible, "part \(part.name) has an empty init packet or image"))
            }
            packetSize = size
            return request(.select(.command), .selectCommand)
        case .controlPointNotification(let bytes):
            let response: ControlPointResponse
            do {
                response = try ControlPointResponse(decoding: bytes)
            } catch {
                return violation("undecodable control point notification \(bytes.hexString): \(error)")
            }
            return received(response)
        case .packetsSent:
            switch step {
            case .sendingInit:
                sentOffset = part.initPacket.count
                return request(.calculateChecksum, .checksumInit)
            case .sendingData(let burst): return burstWritten(burst)
            default: return []
            }
        case .timerFired(let fired):
            guard fired == timer else { return [] }
            switch step {
            case .pause: return streamNext()
            case .retryWait(.stream): return streamNext()
            case .retryWait(.create): return createData(objectIndex)
            case .waitingReceipt, .checksumData: return checkpointTimedOut()
            default:
                return fail(
                    DFUEngineError(.timeout, "no answer from the device within \(configuration.checkpointTimeout)"))
            }
        case .disconnected:
            if case .executeData = step, objectIndex == objects.count - 1 {
                // The device acknowledged the last Execute and resets, possibly before its response is out.
                step = .finished
                return [.completed]
            }
            return fail(DFUEngineError(.disconnected, "link lost during the transfer of \(part.name) (resumable)"))
        case .requestNotAcknowledged:
            // The link went before the device acknowledged the request: even a last Execute may never have arrived.
            if case .executeData = step, objectIndex == objects.count - 1 {
                return fail(
                    DFUEngineError(
                        .executeUnconfirmed,
                        "link lost before the device acknowledged the last Execute of \(part.name): installed if it restarts into its application"
                    ))
            }
            return fail(DFUEngineError(.disconnected, "link lost during the transfer of \(part.name) (resumable)"))
        case .stopRequested:
            stopRequested = true
            // Before the first request nothing is under way: stop at once. Otherwise at the next executed object.
            if step == .idle {
                return fail(DFUEngineError(.stopped, "stopped before \(part.name) started (resumable)"))
            }
            return []
        case .cancelled:
            step = .failed
            let failure = DFUAction.failed(DFUEngineError(.cancelled, "transfer cancelled"))
            return configuration.abortOnCancel ? [.writeControlPoint(.abort), failure] : [failure]
        }
    }

    // MARK: - Responses

    mutating func received(_ response: ControlPointResponse) -> [DFUAction] {
        silentTimeouts = 0
        let isReport = response.request == .calculateChecksum && response.status == .success
        if isReport {
            switch step {
            case .checksumInit, .checksumData, .waitingReceipt: break
            case .sendingData:
                // A PRN that overtook our "packets written" event: keep it for the receipt wait.
                if let report = try? response.checksumPayload() { earlyReport = (Int(report.offset), report.crc) }
                return []
            default: return []  // A late or stray PRN: harmless, the next checkpoint checks everything again.
            }
        }
        guard let expected = expectedOpcode, response.request == expected else {
            return violation("unexpected \(response) while \(expectedOpcode.map { "waiting for \($0)" } ?? "idle")")
        }
        if response.status != .success {
            if step == .createData, response.status == .failure(.invalidObject) {
                // SDK 15-17: the page erase could not be queued (flash queue full); the device asks for patience.
                return createRefused(response)
            }
            if response.status == .failure(.operationNotPermitted) {
                // 0x08 on a repeated Execute means "already executed" (SDK 15-17, Android-DFU-Library#252).
                if step == .executeCommand(again: true) { return initExecuted() }
                if step == .executeData(again: true) { return dataObjectExecuted() }
            }
            return fail(
                .remote(
                    response.status, request: response.request, deviceVersion: configuration.deviceFirmwareVersion,
                    packageVersion: part.firmwareVersion))
        }
        switch step {
        case .selectCommand:
            guard let info = try? response.selectPayload() else { return violation("short Select Command response") }
            guard Int(info.maxSize) >= part.initPacket.count else {
                return fail(
                    DFUEngineError(
                        .incompatible,
                        "init packet of \(part.initPacket.count) bytes exceeds the device's \(info.maxSize)"))
            }
            switch DFUPlanning.initResumeDecision(initPacket: part.initPacket, remote: info) {
            case .create: return createCommand()
            case .continueFrom(let offset):
                sentOffset = offset
                return request(.setPRN(0), .setPRNForInit)
            case .executeAgain: return request(.execute, .executeCommand(again: true))
            }
        case .createCommand: return request(.setPRN(0), .setPRNForInit)
        case .setPRNForInit:
            configuredPRN = 0
            return sendInit()
        case .checksumInit:
            guard let report = try? response.checksumPayload() else { return violation("short checksum response") }
            return initChecked(offset: Int(report.offset), crc: report.crc)
        case .executeCommand: return initExecuted()
        case .setPRNForData(let thenSelect):
            packetsSinceReceiptReset = 0
            needsPRNResync = false
            return thenSelect ? request(.select(.data), .selectData) : streamNext()
        case .selectData:
            guard let info = try? response.selectPayload() else { return violation("short Select Data response") }
            return dataSelected(info)
        case .createData:
            packetsSinceReceiptReset = 0
            earlyReport = nil
            if let delay = configuration.pacing.delayAfterCreate(objectIndex: objectIndex) {
                step = .pause
                return [armTimer(delay)]
            }
            return streamNext()
        case .checksumData:
            guard let report = try? response.checksumPayload() else { return violation("short checksum response") }
            return checkpoint(offset: Int(report.offset), crc: report.crc)
        case .waitingReceipt:
            guard let report = try? response.checksumPayload() else { return violation("short checksum response") }
            return receipt(offset: Int(report.offset), crc: report.crc)
        case .executeData: return dataObjectExecuted()
        case .idle, .sendingInit, .sendingData, .pause, .retryWait, .finished, .failed:
            return violation("unexpected \(response)")
        }
    }

    var expectedOpcode: DFUOpcode? {
        switch step {
        case .selectCommand, .selectData: .select
        case .createCommand, .createData: .create
        case .setPRNForInit, .setPRNForData: .setPRN
        case .checksumInit, .checksumData, .waitingReceipt: .calculateChecksum
        case .executeCommand, .executeData: .execute
        case .idle, .sendingInit, .sendingData, .pause, .retryWait, .finished, .failed: nil
        }
    }

    // MARK: - Init packet

    mutating func createCommand() -> [DFUAction] {
        sentOffset = 0
        return request(.create(type: .command, size: UInt32(part.initPacket.count)), .createCommand)
    }

    mutating func sendInit() -> [DFUAction] {
        step = .sendingInit
        let packets = DFUPlanning.packets(in: sentOffset..<part.initPacket.count, packetSize: packetSize)
        return [.sendPackets(DFUPacketBurst(source: .initPacket, packets: packets))]
    }

    mutating func initChecked(offset: Int, crc: UInt32) -> [DFUAction] {
        let length = part.initPacket.count
        if offset == length, initCRC.matches(offset: offset, crc: crc) {
            failures = 0
            return request(.execute, .executeCommand(again: false))
        }
        guard offset <= length else { return violation("device reports init offset \(offset) of \(length)") }
        retries += 1
        failures += 1
        let shortfall = initCRC.matches(offset: offset, crc: crc)
        guard failures < configuration.maxAttempts else {
            return fail(
                shortfall
                    ? DFUEngineError(.bytesLost, "init packet: device has \(offset) of \(length) bytes")
                    : DFUEngineError(.crcMismatch, "init packet CRC mismatch at offset \(offset)"))
        }
        if shortfall {
            bytesResent += length - offset
            sentOffset = offset
            return sendInit()
        }
        bytesResent += length
        return createCommand()
    }

    mutating func initExecuted() -> [DFUAction] {
        failures = 0
        if stopRequested { return fail(stoppedError) }
        let prn = configuration.pacing.packetReceiptInterval
        configuredPRN = prn
        return request(.setPRN(prn), .setPRNForData(thenSelect: true))
    }

    // MARK: - Helpers

    mutating func request(_ request: ControlPointRequest, _ next: Step) -> [DFUAction] {
        step = next
        return [.writeControlPoint(request), armTimer(configuration.checkpointTimeout)]
    }

    mutating func armTimer(_ duration: Duration) -> DFUAction {
        timer = DFUTimer(id: timer.id + 1)
        return .startTimer(timer, duration)
    }

    mutating func fail(_ error: DFUEngineError) -> [DFUAction] {
        step = .failed
        return [.failed(error)]
    }

    /// The error of a run that stopped at a safe point.
    var stoppedError: DFUEngineError {
        let done = objects.isEmpty ? "the init packet" : "object \(objectIndex + 1) of \(objects.count)"
        return DFUEngineError(.stopped, "stopped at a safe point after \(done) of \(part.name) (resumable)")
    }

    mutating func violation(_ reason: String) -> [DFUAction] {
        fail(DFUEngineError(.protocolViolation, reason))
    }

    var progress: DFUProgress {
        DFUProgress(
            objectIndex: objectIndex, objectCount: objects.count, bytesConfirmed: min(sentOffset, part.image.count),
            totalBytes: part.image.count, retries: retries, bytesResent: bytesResent)
    }
}
