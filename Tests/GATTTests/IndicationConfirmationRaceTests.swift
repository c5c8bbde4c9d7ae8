import ATT
import BLECore
import Synchronization
import TestDoubles
import Testing

@testable import GATT

/// The buttonless jump that did not happen under load (issue 21, `FlashPartsTests` exit 44): the GATT server's
/// `indicate` sends the indication off the actor; a quick client confirmed it and `run()` handled that confirmation
/// before `indicate` was back to wait for it, so the confirmation was dropped as unexpected and `indicate` waited for
/// the 30 s ATT timeout (the virtual device then never reset into its bootloader). The bearer below plays that client
/// at exactly that moment: its `send` of the indication returns only once the server has read the confirmation.
@Suite(.timeLimit(.minutes(3))) struct IndicationConfirmationRaceTests {
    /// The server side of a link whose client confirms every indication before the server's send returns.
    final class QuickConfirmingBearer: ATTBearer, Sendable {
        let linkInfo = LinkInfo()
        private struct State {
            var inbox: [[UInt8]] = []
            var receiver: CheckedContinuation<[UInt8]?, Never>?
            var closed = false
            /// Resumed by the next `receive` after the confirmation was taken: the server has handled it.
            var afterConfirmation: CheckedContinuation<Void, Never>?
            var confirmationTaken = false
            var sent: [[UInt8]] = []
        }
        private let state = Mutex(State())

        var sent: [[UInt8]] { state.withLock { $0.sent } }

        func send(_ pdu: [UInt8]) async throws(BearerError) {
            state.withLock { $0.sent.append(pdu) }
            guard pdu.first == ATTOpcode.handleValueIndication.rawValue else { return }
            // The client confirms (0x1E) at once; the send returns once the server's run loop has handled it.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let receiver = state.withLock { state -> CheckedContinuation<[UInt8]?, Never>? in
                    state.afterConfirmation = done
                    if let receiver = state.receiver {
                        state.receiver = nil
                        state.confirmationTaken = true
                        return receiver
                    }
                    state.inbox.append([0x1E])
                    return nil
                }
                receiver?.resume(returning: [0x1E])
            }
        }

        func receive() async throws(BearerError) -> [UInt8] {
            let pdu = await withCheckedContinuation { (continuation: CheckedContinuation<[UInt8]?, Never>) in
                let (next, handled) = state.withLock { state -> ([UInt8]??, CheckedContinuation<Void, Never>?) in
                    if state.closed { return (.some(nil), nil) }
                    var handled: CheckedContinuation<Void, Never>?
                    if state.confirmationTaken {
                        // Asked for the next PDU: the confirmation taken before is handled.
                        state.confirmationTaken = false
                        handled = state.afterConfirmation
                        state.afterConfirmation = nil
                    }
                    if !state.inbox.isEmpty {
                        let pdu = state.inbox.removeFirst()
                        if pdu == [0x1E] { state.confirmationTaken = true }
                        return (pdu, handled)
                    }
                    state.receiver = continuation
                    return (nil, handled)
                }
                handled?.resume()
                if let next { continuation.resume(returning: next) }
            }
            guard let pdu else { throw BearerError(.closed, "closed") }
            return pdu
        }

        func close() async {
            let receiver = state.withLock { state -> CheckedContinuation<[UInt8]?, Never>? in
                state.closed = true
                defer { state.receiver = nil }
                return state.receiver
            }
            receiver?.resume(returning: nil)
        }
    }

    @Test func aConfirmationHandledBeforeIndicateWaitsIsNotLost() async throws {
        let bearer = QuickConfirmingBearer()
        let clock = ManualClock()
        let server = GATTServer(database: threeServiceDatabase(), bearer: bearer, clock: clock)
        let running = Task { await server.run() }
        // Handle Value Indication on 0x000B, value 01; the client's confirmation (1E) comes back before the send ends.
        let finished = Mutex(false)
        let indication = Task {
            defer { finished.withLock { $0 = true } }
            try await server.indicate(handle: 0x0B, value: [0x01])
        }
        // Until the indication has ended, or waits for a confirmation that has come already (each iteration lets the
        // other tasks run).
        var spins = 0
        while !finished.withLock({ $0 }), !(await server.isAwaitingConfirmation), spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
        #expect(finished.withLock { $0 }, "indicate waits for the confirmation the server has already handled")
        await server.close()  // ends a wait that would otherwise last the 30 s ATT timeout
        await #expect(throws: Never.self) { try await indication.value }
        #expect(bearer.sent == [[0x1D, 0x0B, 0x00, 0x01]])  // Handle Value Indication, handle 0x000B, value 01
        #expect(clock.now == ManualClock.Instant(offset: .zero))  // no timeout was needed
        _ = await running.value
    }
}
