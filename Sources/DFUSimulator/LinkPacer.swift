import ATT
import BLECore
import Synchronization

/// The link model's air time for one device's link, kept apart from the device actor so that pacing needs no hop
/// onto it (a lock, no actor hop per PDU). Every virtual device family (Legacy DFU, MCUmgr SMP) paces its PDUs here.
///
/// A link from a named central adapter takes a seat on that adapter's air (``SharedAir``, docs/simulator.md "One
/// controller per central adapter"): its PDUs are carried at the speed the adapter's controller gives it, as the
/// Secure DFU device's are (one kind of link for every family).
final class LinkPacer: Sendable {
    private struct State {
        var freeAt: Duration = .zero
        var writeCommandMicrosBySize: [Int: Double] = [:]
        var seat: SharedAir.Seat?
    }

    let model: LinkModel
    let speedup: Double
    let sharedAir: SharedAir?
    private let state = Mutex(State())

    init(model: LinkModel, speedup: Double, sharedAir: SharedAir? = nil) {
        self.model = model
        self.speedup = speedup > 0 ? speedup : 1
        self.sharedAir = sharedAir
    }

    func reset(at now: Duration) { state.withLock { $0.freeAt = now } }

    /// A new link (served from `now`): it takes a seat on its central adapter's air when it names one. Returns the
    /// seat, which ``disconnected(_:)`` gives back.
    @discardableResult
    func connected(_ link: LinkInfo, at now: Duration) -> SharedAir.Seat? {
        let seat = link.centralAdapter.flatMap { sharedAir?.join(adapter: $0, model: model) }
        state.withLock { state in
            state.freeAt = now
            state.seat = seat
        }
        return seat
    }

    /// A link ended: its seat is given back (the adapter's other links share the air again). A newer link's seat,
    /// taken meanwhile, stays.
    func disconnected(_ seat: SharedAir.Seat?) {
        guard let seat else { return }
        state.withLock { state in
            if state.seat == seat { state.seat = nil }
        }
        sharedAir?.leave(seat)
    }

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
            var micros: Double
            if request {
                micros = model.requestRoundTripMicros
            } else if let known = state.writeCommandMicrosBySize[attBytes] {
                micros = known
            } else {
                micros = model.writeCommandMicros(attBytes: attBytes)
                state.writeCommandMicrosBySize[attBytes] = micros
            }
            // Sharing the central's air: the link carries its PDUs at the speed the controller gives it.
            if !request, let seat = state.seat, let air = sharedAir { micros /= air.speed(seat) }
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
