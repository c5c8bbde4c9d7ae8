import BLECore
import DFUProtocol

/// A small model of the SDK 16 bootloader request handler (secure-dfu-anchors.md 2.4, 2.5) for engine tests:
/// command and data objects, offset/CRC, executed offset (`offset_last`), the PRN counter, 0x08 on a second
/// Execute, silent drops of chosen packets, and an extended error on Execute Command.
public struct FakeBootloader: Sendable {
    public init() {}

    public var commandMax = 512
    public var dataMax = 4096
    public var command: [UInt8] = []
    public var commandSize = 0
    public var commandExecuted = false
    public var firmware: [UInt8] = []
    public var executedOffset = 0
    public var objectEnd = 0
    public var objectExecuted = true
    public var currentType: DFUObjectType?
    public var prn: UInt16 = 0
    public var prnCounter = 0
    public var packetIndex = 0
    /// Packets (counted from 0 across the whole run) dropped silently and not counted toward the PRN.
    public var dropPackets: Set<Int> = []
    /// Packets whose first byte is flipped (stored, counted).
    public var corruptPackets: Set<Int> = []
    public var executeCommandError: DFUExtendedError?
    public var requests: [ControlPointRequest] = []
    public var reset = false

    public var dataCRC: UInt32 { CRC32.checksum(firmware) }

    public mutating func controlPoint(_ bytes: [UInt8]) -> [[UInt8]] {
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

    public mutating func packet(_ bytes: [UInt8]) -> [[UInt8]] {
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
    public mutating func disconnect(keepsProgress: Bool) {
        if !keepsProgress { firmware = Array(firmware[0..<executedOffset]) }
        currentType = nil
        prn = 0
        prnCounter = 0
    }
}

extension FakeBootloader: CustomStringConvertible {
    public var description: String { "FakeBootloader(firmware \(firmware.count) bytes, executed \(executedOffset))" }
}
