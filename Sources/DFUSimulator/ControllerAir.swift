/// How the links of one central controller share its radio (many-links.md §1.2, §6.1).
///
/// - **Placement.** The controller reserves a slot per connection event of each link (its `t_event`: a fixed event
///   length such as Nordic S140's 3.75 ms, or one full-length packet pair as Zephyr reserves) and places each new
///   link's anchor point in the first gap where all its events fit (best fit, or after the last central event;
///   nRF Connect SDK scheduling.rst "Initiator timing"). A link that finds no gap collides: overlapping events are
///   served in turn and each link keeps only part of its events (R = Σ slot / interval > 1 → 1/R of them).
/// - **Air.** A link at its full rate fills its events (`fullAir`, the fraction of the radio's time it occupies);
///   bounded by its device (flash) it needs less (`demand`). One radio has 100 % to give: links get their demand
///   while the sum fits, and otherwise a max-min fair share (each as much as the others, none more than it needs),
///   so the adapter's aggregate throughput never exceeds its air.
public enum ControllerAir {
    /// One link as the controller sees it. Durations in µs; fractions of the radio's time.
    public struct Link: Sendable, Hashable {
        public var id: Int
        public var intervalMicros: Double
        /// What the controller reserves per event of this link (placement).
        public var slotMicros: Double
        /// The fraction of the radio the link occupies at its full air rate (its events filled).
        public var fullAir: Double
        /// The fraction it needs at its own bottleneck (its flash, or the air): at most `fullAir`.
        public var demand: Double

        public init(id: Int, intervalMicros: Double, slotMicros: Double, fullAir: Double, demand: Double) {
            self.id = id
            self.intervalMicros = max(intervalMicros, 1)
            self.slotMicros = max(slotMicros, 0)
            self.fullAir = max(fullAir, 0)
            self.demand = min(max(demand, 0), max(fullAir, 0))
        }
    }

    /// What each link gets.
    public struct Plan: Sendable, Hashable {
        /// Anchor offsets in µs from the controller's time origin, in order of arrival; nil: no gap, it collides.
        public var anchors: [Int: Double?]
        /// Σ slot / interval over the links (> 1: events collide).
        public var reservation: Double
        /// The fraction of the radio each link gets.
        public var allotted: [Int: Double]
        /// The fraction of its full air rate each link may use (1: as fast as alone).
        public var speed: [Int: Double]
        /// The fraction of its connection events each link keeps (1 unless events collide).
        public var events: [Int: Double]

        /// The radio time all links use together.
        public var airInUse: Double { allotted.values.reduce(0, +) }
    }

    /// Places and shares `links` (in order of arrival).
    public static func plan(_ links: [Link]) -> Plan {
        let anchors = place(links)
        let reservation = links.reduce(0) { $0 + $1.slotMicros / $1.intervalMicros }
        let eventShare = reservation > 1 && anchors.values.contains(where: { $0 == nil }) ? 1 / reservation : 1
        let caps = links.map { (id: $0.id, cap: min($0.demand, $0.fullAir * eventShare)) }
        let allotted = fairShare(caps, capacity: 1)
        var speed: [Int: Double] = [:]
        var events: [Int: Double] = [:]
        for link in links {
            let given = allotted[link.id] ?? 0
            // A link that gets all it needs runs as it would alone; one that gets less runs at the air it got.
            let satisfied = given >= link.demand - 1e-9
            speed[link.id] = satisfied ? 1 : (link.fullAir > 0 ? min(1, given / link.fullAir) : 1)
            events[link.id] = eventShare
        }
        return Plan(anchors: anchors, reservation: reservation, allotted: allotted, speed: speed, events: events)
    }

    /// Max-min fair shares of `capacity` for links that each need at most `cap`.
    static func fairShare(_ links: [(id: Int, cap: Double)], capacity: Double) -> [Int: Double] {
        var remaining = capacity
        var pending = links.sorted { $0.cap < $1.cap }
        var result: [Int: Double] = [:]
        while !pending.isEmpty {
            let level = remaining / Double(pending.count)
            if let first = pending.first, first.cap <= level {
                result[first.id] = first.cap
                remaining -= first.cap
                pending.removeFirst()
            } else {
                for link in pending { result[link.id] = level }
                break
            }
        }
        return result
    }

    /// Anchor offsets: each link in turn takes the earliest offset within its interval at which none of its event
    /// slots overlaps a slot of a link placed before it, over the longest interval (the links' intervals are
    /// assumed to divide each other, as 7.5 ms and 30 ms do).
    static func place(_ links: [Link]) -> [Int: Double?] {
        let period = links.map(\.intervalMicros).max() ?? 0
        var placed: [(start: Double, length: Double)] = []  // occupied windows within one period
        var anchors: [Int: Double?] = [:]
        for link in links {
            let repeats = max(1, Int((period / link.intervalMicros).rounded(.down)))
            var candidates = [0.0] + placed.map { ($0.start + $0.length).truncatingRemainder(dividingBy: link.intervalMicros) }
            candidates.sort()
            let found = candidates.first { offset in
                guard offset + link.slotMicros <= link.intervalMicros + 1e-6 else { return false }
                return (0..<repeats).allSatisfy { index in
                    let start = offset + Double(index) * link.intervalMicros
                    return !placed.contains { overlaps(start, link.slotMicros, $0.start, $0.length, period: period) }
                }
            }
            anchors[link.id] = .some(found)
            if let found {
                for index in 0..<repeats {
                    placed.append((found + Double(index) * link.intervalMicros, link.slotMicros))
                }
            }
        }
        return anchors
    }

    /// Whether two windows overlap on a circle of `period` µs (touching ends do not overlap).
    static func overlaps(_ a: Double, _ aLength: Double, _ b: Double, _ bLength: Double, period: Double) -> Bool {
        guard period > 0 else { return false }
        let epsilon = 1e-6
        for shift in [-period, 0, period] {
            let start = b + shift
            if a < start + bLength - epsilon && start < a + aLength - epsilon { return true }
        }
        return false
    }
}
