/// The air-time model of one link (linux-ble.md §4.1 and appendix C).
///
/// LL PDU time: `T(payload) = 8 × (P + 4 + 2 + payload + MIC + 3) / R` µs, where P is the preamble (1 byte on 1M,
/// 2 on 2M), 4 the access address, 2 the LL header, MIC 4 bytes when encrypted and payload > 0, 3 the CRC, and R
/// 1 or 2 bits/µs. One central → peripheral data PDU costs a cycle `C = T(data) + 150 + T(0) + 150` (the peer's
/// empty acknowledgement and two T_IFS). An ATT PDU of `MTU` bytes travels as an L2CAP PDU of `MTU + 4` bytes split
/// into `⌈(MTU + 4) / LL⌉` LL fragments. Fragments are packed greedily into connection events: at most
/// `packetsPerEvent` per event, and only while their cycle fits the rest of the interval; the rest continue in the
/// next event. Throughput = (MTU − 3) × ATT PDUs per second.
public struct LinkModel: Sendable, Hashable {
    public var link: LinkParameters
    public var flash: FlashParameters
    /// The central controller's fixed event length, µs, when it sets one (Nordic S140: 3.75 ms): fragments beyond it
    /// wait for the next event. Nil: an event runs as long as the packets and the interval allow.
    public var eventLengthCapMicros: Double?

    public init(link: LinkParameters, flash: FlashParameters) {
        self.link = link
        self.flash = flash
    }

    public init(profile: DeviceProfile) {
        self.init(link: profile.link, flash: profile.flash)
    }

    var is2M: Bool { link.phy.uppercased() == "2M" }
    var bitsPerMicro: Double { is2M ? 2 : 1 }
    var preamble: Int { is2M ? 2 : 1 }
    var llLength: Int { min(max(link.llDataLength, 27), 251) }
    var intervalMicros: Double { max(link.connectionIntervalMs, 7.5) * 1000 }
    /// The time one connection event may last: the interval, or the controller's event length.
    var eventMicros: Double { min(intervalMicros, eventLengthCapMicros ?? intervalMicros) }

    /// On-air time of one LL data PDU carrying `payload` bytes, µs.
    public func pduMicros(payload: Int) -> Double {
        let mic = link.encrypted && payload > 0 ? 4 : 0
        return Double(8 * (preamble + 4 + 2 + payload + mic + 3)) / bitsPerMicro
    }

    /// One data PDU plus the empty acknowledgement and both inter-frame spaces, µs.
    public func cycleMicros(payload: Int) -> Double {
        pduMicros(payload: payload) + 150 + pduMicros(payload: 0) + 150
    }

    /// Full-size LL PDUs per connection event.
    public var llPacketsPerEvent: Int {
        let fit = Int(eventMicros / cycleMicros(payload: llLength))
        return max(1, min(max(link.packetsPerEvent, 1), fit))
    }

    /// LL fragments needed for one ATT PDU of `attBytes` bytes.
    public func fragments(attBytes: Int) -> Int {
        max(1, (attBytes + 4 + llLength - 1) / llLength)
    }

    /// Payload sizes of the LL fragments of one ATT PDU (L2CAP header included).
    func fragmentSizes(attBytes: Int) -> [Int] {
        let total = attBytes + 4
        return (0..<fragments(attBytes: attBytes)).map { min(llLength, total - $0 * llLength) }
    }

    /// Write Commands of `attBytes` bytes per second, packing fragments greedily into connection events (a
    /// fragment that does not fit the rest of the event, or beyond `packetsPerEvent`, goes in the next one).
    public func pdusPerSecond(attBytes: Int) -> Double {
        let sizes = fragmentSizes(attBytes: attBytes)
        let cycles = sizes.map { cycleMicros(payload: $0) }
        let cap = max(link.packetsPerEvent, 1)
        let events = 1000
        var index = 0
        var completed = 0
        for _ in 0..<events {
            var remaining = eventMicros
            var sent = 0
            while sent < cap, cycles[index] <= remaining {
                remaining -= cycles[index]
                sent += 1
                index += 1
                if index == sizes.count {
                    index = 0
                    completed += 1
                }
            }
            if sent == 0 { break }
        }
        let pdus = Double(completed) + Double(index) / Double(sizes.count)
        return pdus * 1_000_000 / (Double(events) * intervalMicros)
    }

    /// The modelled time a Write Command of `attBytes` occupies the link, µs (at a steady stream).
    public func writeCommandMicros(attBytes: Int) -> Double {
        let rate = pdusPerSecond(attBytes: attBytes)
        return rate > 0 ? 1_000_000 / rate : intervalMicros
    }

    /// Air time of one ATT PDU of `attBytes` bytes: its LL fragments, each with the peer's empty acknowledgement, µs.
    public func airMicros(attBytes: Int) -> Double {
        fragmentSizes(attBytes: attBytes).map { cycleMicros(payload: $0) }.reduce(0, +)
    }

    /// A connection event with nothing to send: an empty PDU each way and both inter-frame spaces, µs.
    public var emptyEventMicros: Double { 2 * pduMicros(payload: 0) + 300 }

    /// What the central's controller reserves per connection event of this link, µs (many-links.md §1.2): its fixed
    /// event length, or one full-length packet pair (Zephyr's slot: max Tx time + T_IFS + max Rx time).
    public var reservedSlotMicros: Double { eventLengthCapMicros ?? cycleMicros(payload: llLength) }

    /// The fraction of the central's radio this link occupies sending Write Commands of `mtu` bytes back to back
    /// (its events filled): PDUs per second × their air time.
    public func fullAirFraction(mtu: Int? = nil) -> Double {
        let mtu = min(mtu ?? link.maxMTU, link.maxMTU)
        return min(1, pdusPerSecond(attBytes: mtu) * airMicros(attBytes: mtu) / 1_000_000)
    }

    /// The fraction it needs at its own bottleneck: the data share scaled down to the flash rate when the flash is
    /// slower than the air, plus one empty exchange in every event that carries no data (many-links.md §6.1:
    /// `A = r_pdu × C(p) + (E − E_data) × C_poll`). At most ``fullAirFraction(mtu:)``.
    public func demandFraction(mtu: Int? = nil) -> Double {
        let mtu = min(mtu ?? link.maxMTU, link.maxMTU)
        let ceiling = ceiling(mtu: mtu)
        guard ceiling.airWriteWithoutResponse > 0 else { return 0 }
        let scale = min(1, ceiling.flash / ceiling.airWriteWithoutResponse)
        let pdus = pdusPerSecond(attBytes: mtu) * scale
        let events = 1_000_000 / intervalMicros
        let eventsWithData = min(events, pdus * Double(fragments(attBytes: mtu)) / Double(max(llPacketsPerEvent, 1)))
        let demand = (pdus * airMicros(attBytes: mtu) + (events - eventsWithData) * emptyEventMicros) / 1_000_000
        return min(demand, fullAirFraction(mtu: mtu))
    }

    /// The modelled round trip of a request and its response, µs.
    public var requestRoundTripMicros: Double { Double(max(link.writeResponseLatencyEvents, 1)) * intervalMicros }

    /// Time to write `bytes` to flash, µs (32-bit words).
    public func flashWriteMicros(bytes: Int) -> Double { Double((bytes + 3) / 4) * flash.wordWriteMicros }

    /// The link's throughput ceilings in bytes per second, for firmware bytes in `mtu - 3`-byte writes.
    public func ceiling(mtu: Int? = nil) -> LinkCeiling {
        let mtu = min(mtu ?? link.maxMTU, link.maxMTU)
        let payload = Double(max(mtu - 3, 1))
        let air = payload * pdusPerSecond(attBytes: mtu)
        let withResponse = payload * 1_000_000 / requestRoundTripMicros
        let page = Double(flash.pageSize)
        let flashRate = page * 1_000_000 / (flashWriteMicros(bytes: flash.pageSize) + flash.pageEraseMicros)
        return LinkCeiling(
            airWriteWithoutResponse: air, airWriteWithResponse: withResponse, flash: flashRate,
            writeWithoutResponse: min(air, flashRate), writeWithResponse: min(withResponse, flashRate))
    }
}

/// Throughput ceilings of a link, bytes per second (1 kB/s = 1000 bytes/s).
public struct LinkCeiling: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Radio only, Write Without Response back to back.
    public var airWriteWithoutResponse: Double
    /// Radio only, one Write Request per round trip.
    public var airWriteWithResponse: Double
    /// Flash: write plus erase of every page.
    public var flash: Double
    /// min(air, flash) for Write Without Response.
    public var writeWithoutResponse: Double
    /// min(air, flash) for Write Request.
    public var writeWithResponse: Double

    public var description: String {
        func kb(_ value: Double) -> String { String(Int((value / 100).rounded())).paddedTenths }
        return "write without response \(kb(writeWithoutResponse)) kB/s (air \(kb(airWriteWithoutResponse)), flash "
            + "\(kb(flash))), write with response \(kb(writeWithResponse)) kB/s"
    }
}

extension String {
    /// "366" → "36.6".
    fileprivate var paddedTenths: String {
        let digits = count < 2 ? String(repeating: "0", count: 2 - count) + self : self
        return digits.dropLast() + "." + digits.suffix(1)
    }
}
