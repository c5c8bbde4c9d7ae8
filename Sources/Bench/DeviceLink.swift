import DFUSimulator

/// The link a real device got (`bench --device`), as `bledfu flash` reports it on BlueZ ("link: interval 7.5 ms,
/// latency 0, timeout 4000 ms; PHY 2M/2M (tx/rx); data length 251/251 bytes (tx/rx)", `LinkTuningReport`), and the
/// figures the virtual cells give for the same link: the link model's Write Without Response ceiling and the
/// Secure DFU protocol bound on it. A real device's flash is not known to the host: the figures are the link's
/// (flash taken as instant), so they are upper bounds of what the device's own bound is.
public struct DeviceLink: Sendable, Hashable {
    public var connectionIntervalMs: Double
    /// The central's transmit PHY: "1M", "2M" (Coded is not modelled: no figures).
    public var phy: String
    /// LL payload octets the central may send.
    public var dataLength: Int
    /// The negotiated ATT_MTU (23 when not known).
    public var mtu: Int
    /// LL data PDUs per connection event; the controller does not report it, so it is measured (from the run's
    /// capture, ``DeviceCapture``) or assumed.
    public var packetsPerEvent: Int
    /// ``packetsPerEvent`` was measured, not assumed.
    public var packetsPerEventMeasured = false

    public init(connectionIntervalMs: Double, phy: String, dataLength: Int, mtu: Int = 23, packetsPerEvent: Int = 6) {
        self.connectionIntervalMs = connectionIntervalMs
        self.phy = phy
        self.dataLength = dataLength
        self.mtu = mtu
        self.packetsPerEvent = packetsPerEvent
    }

    /// The link from a "link: ..." line (possibly after "bledfu: "); nil when it names no interval, PHY or data
    /// length (an unprivileged run, "interval unchanged").
    public init?(reportLine line: String, mtu: Int = 23, packetsPerEvent: Int = 6) {
        guard let start = line.firstRange(of: "link: ") else { return nil }
        var interval: Double?
        var phy: String?
        var dataLength: Int?
        for part in line[start.upperBound...].split(separator: ";") {
            let words = part.split(whereSeparator: { $0 == " " || $0 == "," })
            if words.first == "interval", words.count > 1 { interval = Double(words[1]) }
            if words.first == "PHY", words.count > 1 { phy = words[1].split(separator: "/").first.map(String.init) }
            if words.first == "data", words.count > 2, words[1] == "length" {
                dataLength = words[2].split(separator: "/").first.flatMap { Int($0) }
            }
        }
        guard let interval, let phy, ["1M", "2M"].contains(phy), let dataLength else { return nil }
        self.init(
            connectionIntervalMs: interval, phy: phy, dataLength: dataLength, mtu: mtu, packetsPerEvent: packetsPerEvent)
    }

    /// The link model of this link with an instant flash.
    public var model: LinkModel {
        LinkModel(
            link: LinkParameters(
                phy: phy, llDataLength: min(max(dataLength, 27), 251), maxMTU: max(mtu, 23),
                connectionIntervalMs: connectionIntervalMs, packetsPerEvent: max(packetsPerEvent, 1)),
            flash: FlashParameters(pageSize: 4096, pageEraseMicros: 0, wordWriteMicros: 0, queueDepth: 1 << 20))
    }

    /// Fills `run`'s ceiling (the link's Write Without Response rate) and protocol bound (Secure DFU objects of
    /// `objectSize` bytes on this link), as a virtual cell's.
    public func fill(_ run: inout BenchRun, objectSize: Int = 4096) {
        let model = model
        let ceiling = model.ceiling(mtu: mtu)
        run.mtu = mtu
        run.airBytesPerSecond = ceiling.airWriteWithoutResponse
        run.ceilingBytesPerSecond = ceiling.airWriteWithoutResponse
        run.protocolBoundBytesPerSecond = model.protocolBound(mtu: mtu, objectSize: objectSize)
    }
}
