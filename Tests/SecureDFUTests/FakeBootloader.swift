import BLECore
import DFUProtocol

@testable import SecureDFU

/// A small model of the SDK 16 bootloader request handler (secure-dfu-anchors.md 2.4, 2.5) for engine tests:
/// command and data objects, offset/CRC, executed offset (`offset_last`), the PRN counter, 0x08 on a second
/// Execute, silent drops of chosen packets, and an extended error on Execute Command.
struct FakeBootloader {
    var commandMax = 512
    var dataMax = 4096
    var command: [UInt8] = []
    var commandSize = 0
    var commandExecuted = false
    var firmware: [UInt8] = []
    var executedOffset = 0
    var objectEnd = 0
    var objectExecuted = true
    var currentType: DFUObjectType?
    var prn: UInt16 = 0
    var prnCounter = 0
    var packetIndex = 0
    /// Packets (counted from 0 across the whole run) dropped silently and not counted toward the PRN.
    var dropPackets: Set<Int> = []
    /// Packets whose first byte is flipped (stored, counted).
    var corruptPackets: Set<Int> = []
    var executeCommandError: DFUExtendedError?
    var requests: [ControlPointRequest] = []
    var reset = false

    var dataCRC: UInt32 { CRC32.checksum(firmware) }

    mutating func controlPoint(_ bytes: [UInt8]) -> [[UInt8]] {
        guard let request = try? ControlPointRequest(decoding: bytes) else { return [] }
        requests.append(request)
        func reply(_ status: DFUStatus, _ payload: [UInt8] = []) -> [[UInt8]] {
            [ControlPointResponse(request: request.opcode, status: status, payload: payload).encoded]
        }
        switch request {
        case .select(.command):
            currentType = .command  // Select sets the current object type (nrf_dfu_req_handler.c)
            return [
                ControlPointResponse.select(
                    maxSize: UInt32(commandMax), offset: UInt32(command.count), crc: CRC32.checksum(command)
                ).encoded
            ]
        case .select(.data):
            currentType = .data
            return [
                ControlPointResponse.select(maxSize: UInt32(dataMax), offset: UInt32(firmware.count), crc: dataCRC)
                    .encoded
            ]
        case .create(.command, let size):
            guard size > 0 else { return reply(.failure(.invalidParameter)) }
            guard size <= commandMax else { return reply(.failure(.insufficientResources)) }
            command = []
            commandSize = Int(size)
            commandExecuted = false
            firmware = []
            executedOffset = 0
            currentType = .command
            prnCounter = 0
            return reply(.success)
        case .create(.data, let size):
            guard commandExecuted else { return reply(.failure(.operationNotPermitted)) }
            firmware = Array(firmware[0..<executedOffset])
            objectEnd = executedOffset + Int(size)
            objectExecuted = false
            currentType = .data
            prnCounter = 0
            return reply(.success)
        case .setPRN(let value):
            prn = value
            prnCounter = 0
            return reply(.success)
        case .calculateChecksum:
            if currentType == .command {
                return [
                    ControlPointResponse.checksum(offset: UInt32(command.count), crc: CRC32.checksum(command)).encoded
                ]
            }
            return [ControlPointResponse.checksum(offset: UInt32(firmware.count), crc: dataCRC).encoded]
        case .execute:
            if currentType == .command || (currentType == nil && !command.isEmpty) {
                if commandExecuted { return reply(.failure(.operationNotPermitted)) }
                guard command.count == commandSize || currentType == nil else {
                    return reply(.failure(.operationNotPermitted))
                }
                if let error = executeCommandError { return reply(.extended(error)) }
                commandExecuted = true
                return reply(.success)
            }
            guard !objectExecuted, firmware.count == objectEnd else { return reply(.failure(.operationNotPermitted)) }
            objectExecuted = true
            executedOffset = firmware.count
            return reply(.success)
        case .abort:
            reset = true
            return []
        default:
            return reply(.failure(.opCodeNotSupported))
        }
    }

    mutating func packet(_ bytes: [UInt8]) -> [[UInt8]] {
        defer { packetIndex += 1 }
        if dropPackets.contains(packetIndex) { return [] }
        var bytes = bytes
        if corruptPackets.contains(packetIndex), !bytes.isEmpty { bytes[0] ^= 0xFF }
        switch currentType {
        case .command:
            command.append(contentsOf: bytes)
        case .data:
            guard firmware.count + bytes.count <= objectEnd else { return [] }
            firmware.append(contentsOf: bytes)
        default: return []
        }
        guard prn > 0 else { return [] }
        prnCounter += 1
        guard prnCounter >= Int(prn) else { return [] }
        prnCounter = 0
        let (offset, crc) =
            currentType == .command
            ? (command.count, CRC32.checksum(command)) : (firmware.count, dataCRC)
        return [ControlPointResponse.checksum(offset: UInt32(offset), crc: crc).encoded]
    }

    /// Link loss: the bootloader reloads settings; with `keepsProgress` (NRF_DFU_SAVE_PROGRESS_IN_FLASH) data stays.
    mutating func disconnect(keepsProgress: Bool) {
        if !keepsProgress { firmware = Array(firmware[0..<executedOffset]) }
        currentType = nil
        prn = 0
        prnCounter = 0
    }
}

/// Runs a state machine against a fake bootloader in-process, as the driver would: actions in order, packets
/// written before notifications are delivered, and the latest timer fired when nothing else is left to happen.
struct Loop {
    var machine: SecureDFUStateMachine
    var device: FakeBootloader
    var log: [DFUAction] = []
    var result: Result<Void, DFUEngineError>?
    var timersFired = 0
    /// The durations of the timers that fired (the time the engine waited).
    var waited: Duration = .zero
    /// Disconnect after this many data packets (once).
    var disconnectAfterPackets: Int?

    init(
        part: DFUPart, configuration: SecureDFUConfiguration = SecureDFUConfiguration(),
        device: FakeBootloader = FakeBootloader()
    ) {
        machine = SecureDFUStateMachine(part: part, configuration: configuration)
        self.device = device
    }

    mutating func run(mtu: Int = 247, maxSteps: Int = 100_000) {
        var events: [DFUEvent] = [.started(mtu: mtu)]
        var timer: (DFUTimer, Duration)?
        var steps = 0
        while result == nil, steps < maxSteps {
            steps += 1
            let event: DFUEvent
            if !events.isEmpty {
                event = events.removeFirst()
            } else if let (pending, duration) = timer {
                timer = nil
                timersFired += 1
                waited += duration
                event = .timerFired(pending)
            } else {
                break
            }
            var notifications: [[UInt8]] = []
            for action in machine.handle(event) {
                log.append(action)
                switch action {
                case .writeControlPoint(let request):
                    if request == .abort { device.reset = true }
                    notifications += device.controlPoint(request.encoded)
                case .sendPackets(let burst):
                    let bytes = burst.source == .initPacket ? machine.part.initPacket : machine.part.image
                    var lost = false
                    for range in burst.packets {
                        if let limit = disconnectAfterPackets, burst.source == .firmware, device.packetIndex >= limit {
                            lost = true
                            break
                        }
                        notifications += device.packet(Array(bytes[range]))
                    }
                    if lost {
                        disconnectAfterPackets = nil
                        events.append(.disconnected)
                    } else {
                        events.append(.packetsSent)
                    }
                case .startTimer(let t, let duration): timer = (t, duration)
                case .completed: result = .success(())
                case .failed(let error): result = .failure(error)
                case .progress, .objectExecuted: break
                }
            }
            events += notifications.map { .controlPointNotification($0) }
        }
    }

    var requests: [ControlPointRequest] { log.compactMap { if case .writeControlPoint(let r) = $0 { r } else { nil } } }
    var failure: DFUEngineError? { if case .failure(let e) = result { e } else { nil } }
    var succeeded: Bool { if case .success = result { true } else { false } }
}

/// Deterministic test bytes.
func testBytes(_ count: Int, seed: UInt32 = 1) -> [UInt8] {
    var x = seed &* 2_654_435_761 | 1
    return (0..<count).map { _ in
        x ^= x << 13
        x ^= x >> 17
        x ^= x << 5
        return UInt8(truncatingIfNeeded: x)
    }
}

func testPart(imageSize: Int = 10_000, initSize: Int = 141) -> DFUPart {
    DFUPart(
        name: "application", initPacket: testBytes(initSize, seed: 7), image: testBytes(imageSize, seed: 3),
        firmwareVersion: 2)
}

extension Loop: CustomStringConvertible {
    var description: String { "Loop(\(machine.part.name), result \(String(describing: result)), \(log.count) actions)" }
}

extension FakeBootloader: CustomStringConvertible {
    var description: String { "FakeBootloader(firmware \(firmware.count) bytes, executed \(executedOffset))" }
}
