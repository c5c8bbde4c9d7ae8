import BLECore
import Synchronization

/// The air of the central adapters that connect to one simulator's devices (docs/simulator.md, "One controller per
/// central adapter"; many-links.md §1.2, §6.1).
///
/// A device's end of a virtual radio link knows which central adapter the link comes from (`LinkInfo
/// .centralAdapter`, docs/virtual-radio.md §4.2). `bledfu simulate` serves every device of the radio in one process,
/// so it sees every link of each central: the links of one adapter join that adapter's controller here, which places
/// and shares them (``ControllerAir/plan(_:)``), and each device paces its PDUs at the speed its link is given. A
/// link that names no adapter (an old central, a test's socket pair) has the air to itself, as before.
public final class SharedAir: Sendable {
    /// One link's place on its adapter's controller.
    public struct Seat: Sendable, Hashable {
        public let adapter: String
        public let id: Int
        /// The link's rate with the controller's event length, relative to the device's own model (1 without one).
        let eventFactor: Double
    }

    private struct State {
        var nextID = 0
        var links: [String: [ControllerAir.Link]] = [:]
        var plans: [String: ControllerAir.Plan] = [:]
    }

    private let state = Mutex(State())
    private let controller: @Sendable (String) -> ControllerProfile?

    /// - Parameter controller: an adapter's controller; nil for an adapter that is not modelled (its links keep
    ///   the air to themselves, as before the model).
    public init(controller: @escaping @Sendable (_ adapter: String) -> ControllerProfile?) {
        self.controller = controller
    }

    /// A new link of `adapter` whose device paces by `model`; nil when the adapter is not modelled.
    public func join(adapter: String, model: LinkModel) -> Seat? {
        guard let profile = controller(adapter) else { return nil }
        var capped = model
        capped.eventLengthCapMicros = profile.eventLengthMicros
        let mtu = model.link.maxMTU
        let alone = model.pdusPerSecond(attBytes: mtu)
        let eventFactor = alone > 0 ? min(1, capped.pdusPerSecond(attBytes: mtu) / alone) : 1
        return state.withLock { state in
            state.nextID += 1
            let link = ControllerAir.Link(
                id: state.nextID, intervalMicros: capped.intervalMicros, slotMicros: capped.reservedSlotMicros,
                fullAir: capped.fullAirFraction(), demand: capped.demandFraction())
            state.links[adapter, default: []].append(link)
            state.plans[adapter] = ControllerAir.plan(state.links[adapter] ?? [])
            return Seat(adapter: adapter, id: state.nextID, eventFactor: eventFactor)
        }
    }

    /// The link ended: the others share the air again.
    public func leave(_ seat: Seat) {
        state.withLock { state in
            state.links[seat.adapter]?.removeAll { $0.id == seat.id }
            if state.links[seat.adapter]?.isEmpty ?? true {
                state.links[seat.adapter] = nil
                state.plans[seat.adapter] = nil
            } else {
                state.plans[seat.adapter] = ControllerAir.plan(state.links[seat.adapter] ?? [])
            }
        }
    }

    /// The fraction of its own full rate the link may use now (1: as fast as alone).
    public func speed(_ seat: Seat) -> Double {
        let shared = state.withLock { $0.plans[seat.adapter]?.speed[seat.id] } ?? 1
        return max(shared * seat.eventFactor, 1e-3)
    }

    /// The adapter's current plan (nil when it has no link).
    public func plan(adapter: String) -> ControllerAir.Plan? { state.withLock { $0.plans[adapter] } }

    /// The links each adapter has now.
    public func linkCounts() -> [String: Int] { state.withLock { $0.links.mapValues(\.count) } }

    /// What `count` identical links of devices modelled by `model` get on one adapter whose controller fixes
    /// `eventLengthMicros` (or not): each link's speed (fraction of its rate alone), each link's Write Without
    /// Response rate, and the adapter's aggregate, B/s (each link at most its flash rate).
    public static func estimate(model: LinkModel, links count: Int, eventLengthMicros: Double?) -> AdapterEstimate {
        var profile = ControllerProfile.generic
        profile.eventLengthMicros = eventLengthMicros
        let air = SharedAir { [profile] _ in profile }
        let seats = (0..<max(count, 1)).compactMap { _ in air.join(adapter: "estimate", model: model) }
        let ceiling = model.ceiling()
        let speeds = seats.map(air.speed)
        let rates = speeds.map { min(ceiling.airWriteWithoutResponse * $0, ceiling.flash) }
        return AdapterEstimate(
            links: seats.count, slowestSpeed: speeds.min() ?? 1, perLink: rates.min() ?? 0,
            aggregate: rates.reduce(0, +), reservation: air.plan(adapter: "estimate")?.reservation ?? 0)
    }
}

/// ``SharedAir/estimate(model:links:eventLengthMicros:)``'s answer.
public struct AdapterEstimate: Sendable, Hashable, Codable {
    public var links: Int
    /// The slowest link's fraction of its rate alone.
    public var slowestSpeed: Double
    /// The slowest link's Write Without Response rate, B/s.
    public var perLink: Double
    /// All links together, B/s.
    public var aggregate: Double
    /// Σ reserved slot / interval (above 1 the controller cannot place every event without overlap).
    public var reservation: Double
}
