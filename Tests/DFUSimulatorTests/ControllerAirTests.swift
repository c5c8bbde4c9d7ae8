import BLECore
import DFUSimulator
import Testing

/// One central controller's radio shared by its links (issue 21 point 1), against the figures of
/// many-links.md §6 (computed there with the same air-time formula).
@Suite("Controller: links sharing one radio", .timeLimit(.minutes(2)))
struct ControllerAirTests {
    /// The bracelet: 1M, LL 27, MTU 247, CI 30 ms, 6 LL PDUs per event (Firmware/bracelet.json).
    static let bracelet = LinkModel(
        link: LinkParameters(phy: "1M", llDataLength: 27, maxMTU: 247, connectionIntervalMs: 30, packetsPerEvent: 6),
        flash: FlashParameters())
    /// A flash-bound sensor: 2M, LL 251, MTU 247, CI 7.5 ms, 5 per event, encrypted, 41 µs per word.
    static let sensor = LinkModel(
        link: LinkParameters(
            phy: "2M", llDataLength: 251, maxMTU: 247, connectionIntervalMs: 7.5, packetsPerEvent: 5, encrypted: true),
        flash: FlashParameters(wordWriteMicros: 41))

    static func links(_ model: LinkModel, count: Int) -> [ControllerAir.Link] {
        (0..<count).map {
            ControllerAir.Link(
                id: $0, intervalMicros: model.link.connectionIntervalMs * 1000, slotMicros: model.reservedSlotMicros,
                fullAir: model.fullAirFraction(), demand: model.demandFraction())
        }
    }

    @Test func aBraceletOccupiesAboutAnEighthOfTheRadio() {
        // §6.3: 10 fragments per ATT PDU (9 × 27 + 8 bytes), 676 µs / 524 µs cycles, 0.6 PDU per 30 ms event:
        // 20.1 PDUs/s × 6608 µs = 13.3 % of the air; air-bound (its flash writes 4 KiB in 154 ms), so all of it is needed.
        let model = Self.bracelet
        #expect(model.airMicros(attBytes: 247) == 9 * 676 + 524)
        #expect(abs(model.fullAirFraction() - 0.1328) < 0.002)
        #expect(model.demandFraction() == model.fullAirFraction())
    }

    @Test func sevenBraceletsFitAnEighthSlowsEveryOne() {
        let seven = ControllerAir.plan(Self.links(Self.bracelet, count: 7))
        #expect(seven.speed.values.allSatisfy { $0 == 1 })
        #expect(abs(seven.airInUse - 7 * Self.bracelet.fullAirFraction()) < 1e-9)
        let eight = ControllerAir.plan(Self.links(Self.bracelet, count: 8))
        #expect(abs(eight.airInUse - 1) < 1e-9)
        for speed in eight.speed.values { #expect(abs(speed - 0.125 / Self.bracelet.fullAirFraction()) < 1e-9) }
    }

    @Test func sixteenBraceletsTogetherCarryWhatOneRadioCarries() {
        // Each link at `speed` of its 4.88 kB/s: together the full-air ceiling of 1M / LL 27 at MTU 247 (§6.3:
        // 36.9 kB/s with no event gaps), never more, however many links.
        let perLink = Self.bracelet.ceiling().airWriteWithoutResponse
        for count in [8, 16, 32] {
            let plan = ControllerAir.plan(Self.links(Self.bracelet, count: count))
            let aggregate = plan.speed.values.map { $0 * perLink }.reduce(0, +)
            let radio = perLink / Self.bracelet.fullAirFraction()
            #expect(abs(aggregate - radio) < 1, "\(count) links: \(aggregate) B/s against \(radio)")
            #expect(abs(radio - 36_800) < 400)
        }
    }

    @Test func flashBoundSensorsNeedLessThanTheirEvents() {
        // A sensor at its flash rate (32 kB/s of a 160 kB/s link) needs about a fifth of its 7.5 ms events' air.
        let model = Self.sensor
        #expect(model.demandFraction() < model.fullAirFraction() / 3)
        let four = ControllerAir.plan(Self.links(model, count: 4))
        #expect(four.speed.values.allSatisfy { $0 == 1 })
        let six = ControllerAir.plan(Self.links(model, count: 6))
        #expect(abs(six.airInUse - 1) < 1e-9)
        #expect(six.speed.values.allSatisfy { $0 < 1 })
    }

    @Test func anchorsArePlacedWithoutOverlapUntilTheIntervalIsFull() {
        // 2M, LL 251: a full-length pair takes 1408 µs encrypted; five fit 7.5 ms (§6.2: "t_event 1.4 ms → 5 links").
        let slot = Self.sensor.reservedSlotMicros
        #expect(slot == 1408)
        let five = ControllerAir.plan(Self.links(Self.sensor, count: 5))
        #expect((0..<5).map { five.anchors[$0] ?? nil } == [0, 1408, 2816, 4224, 5632])
        #expect(five.events.values.allSatisfy { $0 == 1 })
        let six = ControllerAir.plan(Self.links(Self.sensor, count: 6))
        #expect(six.anchors[5] == .some(nil))  // no gap left: it collides
        #expect(abs(six.reservation - 6 * 1408 / 7500) < 1e-9)
        #expect(six.events.values.allSatisfy { abs($0 - 7500 / (6 * 1408)) < 1e-9 })
    }

    @Test func mixedIntervalsNeverOverlapOverTheLongestInterval() {
        // Three bracelets (30 ms, 676 µs slots) and three sensors (7.5 ms, 1408 µs): every event window, over 30 ms.
        var links = Self.links(Self.bracelet, count: 3)
        links += Self.links(Self.sensor, count: 3).map { link in
            var link = link
            link.id += 10
            return link
        }
        let plan = ControllerAir.plan(links)
        var windows: [(Double, Double)] = []
        for link in links {
            let anchor = try? #require(plan.anchors[link.id] ?? nil)
            guard let anchor else { continue }
            let repeats = Int(30_000 / link.intervalMicros)
            windows += (0..<repeats).map { (anchor + Double($0) * link.intervalMicros, link.slotMicros) }
        }
        #expect(windows.count == 3 + 3 * 4)
        let sorted = windows.sorted { $0.0 < $1.0 }
        for (a, b) in zip(sorted, sorted.dropFirst()) { #expect(a.0 + a.1 <= b.0 + 1e-6, "\(a) overlaps \(b)") }
        #expect(sorted.allSatisfy { $0.0 + $0.1 <= 30_000 + 1e-6 })
    }

    @Test func aFixedEventLengthCutsWhatOneEventCarries() {
        // §6.3: with S140's 3.75 ms events and no extension a bracelet sends 5 fragments per event: 4.1 kB/s.
        var model = Self.bracelet
        model.eventLengthCapMicros = 3750
        #expect(model.llPacketsPerEvent == 5)
        #expect(abs(model.ceiling().airWriteWithoutResponse - 4_100) < 100)
        #expect(model.reservedSlotMicros == 3750)
    }

    @Test func presetsAndOptionsParse() throws {
        #expect(try ControllerProfile(parsing: "generic") == .generic)
        #expect(ControllerProfile.generic.maximumLinks == 5)
        let zephyr = try ControllerProfile(parsing: "zephyr-hci-usb")
        #expect(zephyr.maximumLinks == 1 && zephyr.refusal == .memoryCapacityExceeded && zephyr.refusal.errnoName == "ENOMEM")
        let s140 = try ControllerProfile(parsing: "s140:links=8")
        #expect(s140.maximumLinks == 8 && s140.eventLengthMicros == 3750)
        let options = try ControllerProfile(parsing: "links=2,refusal=limited-resources")
        #expect(options.name == "generic" && options.maximumLinks == 2 && options.refusal.status == 0x0D)
        #expect(throws: ControllerProfileError.self) { try ControllerProfile(parsing: "nrf9999") }
        #expect(throws: ControllerProfileError.self) { try ControllerProfile(parsing: "generic:links=0") }
        #expect(throws: ControllerProfileError.self) { try ControllerProfile(parsing: "generic:colour=red") }
        #expect(ControllerProfile.generic.description == "generic: 5 links, then HCI 0x09 Connection Limit Exceeded (EMLINK); events as long as the link's packets")
    }
}
