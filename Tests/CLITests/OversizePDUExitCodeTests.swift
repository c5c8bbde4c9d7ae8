import Batch
import SecureDFU
import Testing

@testable import BledfuCLI

/// A device that breaks ATT (a PDU longer than ATT_MTU closes the link; docs/reliability.md, "Lying devices") makes
/// the engine stop with `protocol-violation`: `bledfu flash` does not reconnect, exits 46 and keeps its journal.
@Suite(.timeLimit(.minutes(5))) struct OversizePDUExitCodeTests {
    @Test func aProtocolViolationExits46() {
        let error = DFUEngineError(
            .protocolViolation,
            "peer sent a 248-byte PDU (Handle Value Notification (0x1B)), longer than ATT_MTU 247; the link was closed")
        #expect(FlashExit.code(for: SecureDFUFamily.map(error)) == 46)
        #expect(FlashExit.code(for: SecureDFUFamily.map(error)) == FlashExit.protocolError)
        // A plain link loss is the resumable 43 instead, which is what the fault would be without the ATT check.
        #expect(FlashExit.code(for: SecureDFUFamily.map(DFUEngineError(.disconnected, "link lost"))) == FlashExit.linkLost)
    }
}
