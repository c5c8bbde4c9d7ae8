import ATT
import Synchronization

/// The link model's air time for one device's link, kept apart from the device actor so that pacing needs no hop
/// onto it (a lock, no actor hop per PDU). Every virtual device family (Legacy DFU, MCUmgr SMP) paces its PDUs here.
final class LinkPacer: Sendable {
    private struct State {
        var freeAt: Duration = .zero
        var writeCommandMicrosBySize: [Int: Double] = [:]
    }

    let model: LinkModel
    let speedup: Double
    private let state = Mutex(State())

    init(model: LinkModel, speedup: Double) {
        self.model = model
        self.speedup = speedup > 0 ? speedup : 1
    }

    func reset(at now: Duration) { state.withLock { $0.freeAt = now } }

    /// How long `pdu` must wait until the modelled link has carried it (and books the link until then): a request
    /// costs a round trip, anything else its air time.
    func cost(of pdu: ATTPDU, now: Duration) -> Duration {
        switch pdu {
        case .writeCommand(_, let value): return cost(attBytes: 3 + value.count, request: false, now: now)
        case .writeRequest, .readRequest, .readBlobRequest, .readByTypeRequest, .readByGroupTypeRequest,
            .findInformationRequest, .findByTypeValueRequest, .exchangeMTURequest:
            return cost(attBytes: 0, request: true, now: now)
        default: return cost(attBytes: pdu.encoded.count, request: false, now: now)
        }
    }

    /// How long a PDU of `attBytes` (or a request's round trip) must wait; books the link until then.
    func cost(attBytes: Int, request: Bool, now: Duration) -> Duration {
        state.withLock { state -> Duration in
            let micros: Double
            if request {
                micros = model.requestRoundTripMicros
            } else if let known = state.writeCommandMicrosBySize[attBytes] {
                micros = known
            } else {
                micros = model.writeCommandMicros(attBytes: attBytes)
                state.writeCommandMicrosBySize[attBytes] = micros
            }
            let start = max(now, state.freeAt)
            state.freeAt = start + .nanoseconds(Int64((micros * 1000 / speedup).rounded()))
            return state.freeAt - now
        }
    }

    /// Waits (through `sleep`) until the modelled link has carried the PDU.
    func pace(attBytes: Int, request: Bool, now: Duration, sleep: @Sendable (Duration) async -> Void) async {
        let wait = cost(attBytes: attBytes, request: request, now: now)
        if wait > .zero { await sleep(wait) }
    }
}
