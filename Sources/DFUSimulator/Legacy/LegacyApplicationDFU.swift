import ATT
import LegacyDFU

/// The DFU service of an application with the legacy buttonless entry (DFU Version 0x0001), pure.
///
/// SDK 11 `dfu_app_handler.c` with `ble_dfu.c` (`ble_app_hrs`): a Control Point write needs notifications on (else
/// ATT 0xFD); `01 <type>` starts the bootloader (the write is authorized first: the central gets its Write
/// Response; `reset_prepare` then drops the link and the app jumps, handing over the peer data); the service's own
/// length checks answer a short `01` or `02` with `10 <op> 06` and a short `08` with `10 08 03`; an unknown opcode
/// gets `10 <op> 03`; every other DFU event (init, data, validate, PRN, a Packet write…) is answered `10 01 03`,
/// always with request opcode 01 (legacy-dfu.md §8.1). Adafruit's Bluefruit `BLEDfu.cpp` jumps on any Control Point
/// write that starts with `01` (legacy-dfu.md §10).
struct LegacyApplicationDFU: Sendable {
    let kind: LegacyFirmwareKind

    enum Outcome: Equatable, Sendable {
        case attError(ATTErrorCode)
        case notify([UInt8])
        /// Enter the bootloader once the write is answered.
        case jump
        case nothing
    }

    func controlPointWrite(_ bytes: [UInt8], cccdEnabled: Bool) -> Outcome {
        guard cccdEnabled else { return .attError(.cccdImproperlyConfigured) }
        guard let first = bytes.first else { return .nothing }
        let opcode = LegacyOpcode(rawValue: first)
        if kind == .adafruit { return opcode == .startDFU ? .jump : .nothing }
        switch opcode {
        case .startDFU: return bytes.count >= 2 ? .jump : answer(opcode, .operationFailed)
        case .initialize where bytes.count < 2: return answer(opcode, .operationFailed)
        case .packetReceiptRequest where bytes.count < 3: return answer(opcode, .notSupported)
        case .initialize, .receiveFirmwareImage, .validate, .activateAndReset, .reset, .reportReceivedImageSize,
            .packetReceiptRequest:
            return answer(.startDFU, .notSupported)
        default: return answer(opcode, .notSupported)
        }
    }

    func packetWrite(_ bytes: [UInt8], cccdEnabled: Bool) -> Outcome {
        guard kind != .adafruit, cccdEnabled else { return .nothing }
        return answer(.startDFU, .notSupported)
    }

    func answer(_ request: LegacyOpcode, _ status: LegacyStatus) -> Outcome {
        .notify(LegacyNotification.response(request: request, status: status).encoded)
    }
}
