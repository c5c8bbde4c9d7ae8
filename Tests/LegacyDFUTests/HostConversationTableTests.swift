import BLECore
import DFUPackage
import LegacyDFU
import Testing

/// The host side as a table (issue 15 point 7): the engine (`LegacyDFUStateMachine`) is brought to every point where
/// it waits for the device, and fed every response `10 <op> <status>` (every request opcode and one unknown, every
/// status and one unknown), every truncated prefix of every notification and malformed ones. Each input either
/// carries the update on (the answer it waits for, with success) or ends it in a named error: the code, and a reason
/// that names the status or the unexpected notification. Nothing is ignored and nothing crashes.
@Suite(.timeLimit(.minutes(5))) struct HostConversationTableTests {
    /// Where the engine waits, in the order of an update.
    enum Stage: String, CaseIterable, CustomTestStringConvertible {
        case starting, initializing, waitingReceipt, waitingLastPacket, askingFinalSize, validating, activating
        var testDescription: String { rawValue }
    }

    static let image = LegacyFixture.firmware(200)
    static let part = LegacyFixture.application(image)

    /// PRN every 2 packets of 20 bytes: five windows of 40 bytes.
    static func machine(at stage: Stage) -> LegacyDFUStateMachine {
        var m = LegacyDFUStateMachine(part: part, configuration: LegacyDFUConfiguration(pacing: LegacyReceiptPacing(interval: 2)))
        func feed(_ event: LegacyDFUEvent) {
            let actions = m.handle(event)
            precondition(!actions.contains { if case .failed = $0 { true } else { false } }, "\(event) failed: \(actions)")
        }
        feed(.started)
        if stage == .starting { return m }
        feed(.notification([0x10, 0x01, 0x01]))
        feed(.packetsSent)
        if stage == .initializing { return m }
        feed(.notification([0x10, 0x02, 0x01]))
        feed(.packetsSent)
        if stage == .waitingReceipt { return m }
        for window in 1..<5 {
            feed(.notification(LegacyNotification.packetReceipt(bytesReceived: UInt32(window * 40)).encoded))
            feed(.packetsSent)
        }
        if stage == .waitingLastPacket { return m }
        feed(.notification([0x10, 0x03, 0x01]))
        if stage == .askingFinalSize { return m }
        feed(.notification(LegacyNotification.receivedImageSize(200).encoded))
        if stage == .validating { return m }
        feed(.notification([0x10, 0x04, 0x01]))
        return m
    }

    /// What a response does at a stage: carries on, or fails with this code and a reason containing this text.
    enum Outcome: Equatable {
        case carriesOn
        case fails(LegacyDFUError.Code, says: String)
    }

    static func expected(_ stage: Stage, op: UInt8, status: LegacyStatus) -> Outcome {
        let named = "refused: \(status)"
        switch (stage, op) {
        case (.starting, 0x01):
            switch status {
            case .success: return .carriesOn
            case .invalidState: return .fails(.deviceReset, says: "busy with an earlier transfer (Start DFU: invalid state)")
            default: return .fails(.remote, says: "Start DFU (0x01) " + named)
            }
        case (.initializing, 0x02):
            if status == .success { return .carriesOn }
            return .fails(.remote, says: "Initialize DFU Parameters (0x02) " + named)
        case (.waitingReceipt, 0x03), (.waitingLastPacket, 0x03), (.askingFinalSize, 0x03):
            switch status {
            case .success where stage == .waitingReceipt:
                return .fails(.protocolViolation, says: "reports the image complete after 40 of 200 bytes")
            case .success: return .carriesOn
            case .operationFailed: return .fails(.bytesLost, says: "the device refused a packet (operation failed")
            default: return .fails(.remote, says: "Receive Firmware Image (0x03) " + named)
            }
        case (.askingFinalSize, 0x07):
            // 10 07 01 with its count is a size report; 10 07 01 alone is truncated (the table's success case).
            if status == .success { return .fails(.protocolViolation, says: "undecodable control point notification 100701") }
            return .fails(.remote, says: "Report Received Image Size (0x07) " + named)
        case (.validating, 0x04):
            switch status {
            case .success: return .carriesOn
            case .crcError: return .fails(.deviceReset, says: "Validate (0x04): CRC error (0x05)")
            default: return .fails(.remote, says: "Validate (0x04) " + named)
            }
        default:
            if op == 0x07, status == .success { return .fails(.protocolViolation, says: "undecodable control point notification 100701") }
            return .fails(.protocolViolation, says: "unexpected Response to \(LegacyOpcode(rawValue: op)): \(status)")
        }
    }

    static let statuses: [LegacyStatus] = [.success, .invalidState, .notSupported, .dataSizeExceedsLimit, .crcError, .operationFailed, LegacyStatus(rawValue: 0x7F)]
    static let opcodes: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09]

    /// The outcome of one input at a stage: the failure, or nil when the engine carries on.
    static func outcome(_ stage: Stage, _ bytes: [UInt8]) -> LegacyDFUError? {
        var m = machine(at: stage)
        for action in m.handle(.notification(bytes)) {
            if case .failed(let error) = action { return error }
        }
        #expect(!m.isFinished || stage == .activating, "\(stage): \(bytes.hexString) finished the engine without an error")
        return nil
    }

    @Test(arguments: Stage.allCases)
    func everyResponseAtEveryStage(stage: Stage) {
        for op in Self.opcodes {
            for status in Self.statuses {
                let bytes: [UInt8] = [0x10, op, status.rawValue]
                let error = Self.outcome(stage, bytes)
                switch Self.expected(stage, op: op, status: status) {
                case .carriesOn:
                    #expect(error == nil, "\(stage): \(bytes.hexString) → \(String(describing: error))")
                case .fails(let code, let says):
                    #expect(error?.code == code, "\(stage): \(bytes.hexString) → \(String(describing: error))")
                    #expect(error?.reason.contains(says) == true, "\(stage): \(bytes.hexString) → \(error?.reason ?? "carried on"), not '\(says)'")
                    #expect(error?.reason.contains("\n") == false)
                }
            }
        }
    }

    /// Every proper prefix of every notification the device sends (the empty one too), and malformed ones: a
    /// protocol violation that quotes the bytes, at every stage.
    @Test(arguments: Stage.allCases)
    func truncatedAndMalformedNotifications(stage: Stage) {
        var inputs: [[UInt8]] = []
        let whole: [[UInt8]] = [
            [0x10, 0x01, 0x01], LegacyNotification.receivedImageSize(200).encoded,
            LegacyNotification.packetReceipt(bytesReceived: 40).encoded,
        ]
        for bytes in whole { inputs += (0..<bytes.count).map { Array(bytes[0..<$0]) } }
        inputs += [[0x10, 0x04, 0x01, 0x00], [0x11, 0x28, 0, 0, 0, 0], [0x60, 0x01, 0x01], [0x20, 0x01, 0x01], [0xFF]]
        for bytes in inputs {
            let error = Self.outcome(stage, bytes)
            #expect(error?.code == .protocolViolation, "\(stage): \(bytes.hexString) → \(String(describing: error))")
            #expect(error?.reason.hasPrefix("undecodable control point notification \(bytes.hexString)") == true, "\(error?.reason ?? "")")
        }
    }

    /// Packet receipts: one for the bytes of the window waited for carries on; more than was sent, or fewer than
    /// the device confirmed before, is a violation; a receipt where none can come (before data, while validating)
    /// too.
    @Test(arguments: Stage.allCases)
    func receiptsAtEveryStage(stage: Stage) {
        let sent: UInt32 = switch stage {
        case .starting, .initializing: 0
        case .waitingReceipt: 40
        default: 200
        }
        for bytes in [UInt32(0), 20, 40, 200, 240] {
            let error = Self.outcome(stage, LegacyNotification.packetReceipt(bytesReceived: bytes).encoded)
            switch stage {
            case .starting, .initializing, .validating, .activating:
                #expect(error?.code == .protocolViolation && error?.reason.contains("unexpected packet receipt (\(bytes) bytes)") == true,
                        "\(stage) \(bytes): \(String(describing: error))")
            default:
                // Four windows confirmed while the last is out; all of it once the last packet was answered.
                let confirmed: UInt32 = stage == .waitingReceipt ? 0 : stage == .waitingLastPacket ? 160 : 200
                if bytes > sent {
                    #expect(error?.reason.contains("reports \(bytes) bytes received but only \(sent) were sent") == true, "\(stage) \(bytes): \(String(describing: error))")
                } else if bytes < confirmed {
                    #expect(error?.reason.contains("byte count went back from \(confirmed) to \(bytes)") == true, "\(stage) \(bytes): \(String(describing: error))")
                } else {
                    #expect(error == nil, "\(stage) \(bytes): \(String(describing: error))")
                }
            }
        }
    }
}
