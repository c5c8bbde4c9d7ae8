/// What the ATT capture of a `bledfu flash` run on a real device (`--capture FILE`, a btsnoop file of ATT PDUs,
/// `BTSnoopWriter`) tells about the link it got, beyond the "link: ..." line (``DeviceLink``): the ATT_MTU both sides
/// agreed, and how many LL packets the link carried per connection event, measured from timing.
///
/// Packets per event: a burst of Write Commands is a run of PDUs the host sent with no PDU received in between; the
/// first PDU received after it (the answer to the checkpoint that ends the burst) arrives only once the link carried
/// the whole burst. A burst of `n` Write Commands of `f` LL fragments each, first sent at `t0`, answered at `t1`,
/// took at most `round((t1 − t0) / CI) − 1` connection events of data (the answer needs one event of its own): at
/// least `⌈n × f / events⌉` fragments per event. The fastest burst of at least ``minimumBurst`` packets gives the
/// figure; it is a lower bound of the link's (a burst slowed by the device's flash, the host, or a controller that
/// sends later than asked, reads as fewer packets per event, never more).
public struct DeviceCapture: Sendable, Hashable {
    /// One ATT PDU of the capture.
    public struct Record: Sendable, Hashable {
        /// Sent by the host (false: received).
        public var sent: Bool
        /// Microseconds on the capture's clock.
        public var micros: Int64
        public var pdu: [UInt8]

        public init(sent: Bool, micros: Int64, pdu: [UInt8]) {
            self.sent = sent
            self.micros = micros
            self.pdu = pdu
        }
    }

    /// A file that is not a btsnoop capture of ATT PDUs.
    public struct FormatError: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public var description: String { "not a bledfu capture: \(reason)" }
    }

    /// Bursts shorter than this say too little about the link.
    public static let minimumBurst = 8

    public var records: [Record]

    public init(records: [Record]) { self.records = records }

    /// Reads a btsnoop file (datalink 1002, H4) of ATT PDUs on the fixed channel (CID 4); other packets are skipped.
    /// A record cut short at the end (a capture of a run that was killed) ends the list.
    public init(btsnoop bytes: [UInt8]) throws(FormatError) {
        guard bytes.count >= 16, Array(bytes[0..<8]) == Array("btsnoop".utf8) + [0] else {
            throw FormatError(reason: "no btsnoop header")
        }
        guard Self.bigEndian(bytes, 12, 4) == 1002 else { throw FormatError(reason: "datalink is not H4 (1002)") }
        var records: [Record] = []
        var offset = 16
        while offset + 24 <= bytes.count {
            let included = Int(Self.bigEndian(bytes, offset + 4, 4))
            let flags = Self.bigEndian(bytes, offset + 8, 4)
            let stamp = Int64(bitPattern: Self.bigEndian(bytes, offset + 16, 8))
            let start = offset + 24
            guard start + included <= bytes.count else { break }
            let packet = bytes[start..<start + included]
            offset = start + included
            // H4 ACL (02), handle (2), ACL length (2), L2CAP length (2), CID 0x0004, then the PDU.
            guard packet.count > 9, packet[start] == 0x02, packet[start + 7] == 0x04, packet[start + 8] == 0x00 else {
                continue
            }
            records.append(Record(sent: flags & 1 == 0, micros: stamp, pdu: Array(packet[(start + 9)...])))
        }
        self.records = records
    }

    static func bigEndian(_ bytes: [UInt8], _ offset: Int, _ count: Int) -> UInt64 {
        bytes[offset..<offset + count].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The ATT_MTU of the link: the smaller of the Exchange MTU request's and response's Rx MTU (nil: no exchange,
    /// the default 23 then applies).
    public var mtu: Int? {
        func rxMTU(_ opcode: UInt8) -> Int? {
            records.first { $0.pdu.count >= 3 && $0.pdu[0] == opcode }.map { Int($0.pdu[1]) | Int($0.pdu[2]) << 8 }
        }
        guard let client = rxMTU(0x02), let server = rxMTU(0x03) else { return nil }
        return max(23, min(client, server))
    }

    /// One burst: Write Commands sent back to back, and when the first PDU after them came back.
    public struct Burst: Sendable, Hashable {
        public var packets: Int
        /// The largest Write Command of the burst, bytes (ATT PDU).
        public var attBytes: Int
        public var firstSentMicros: Int64
        public var answeredMicros: Int64
    }

    /// Every burst of Write Commands that was answered.
    public var bursts: [Burst] {
        var result: [Burst] = []
        var current: Burst?
        for record in records {
            if record.sent {
                guard record.pdu.first == 0x52 else { continue }  // a request closing the burst: still in it
                var burst = current ?? Burst(packets: 0, attBytes: 0, firstSentMicros: record.micros, answeredMicros: 0)
                burst.packets += 1
                burst.attBytes = max(burst.attBytes, record.pdu.count)
                current = burst
            } else if var burst = current {
                burst.answeredMicros = record.micros
                result.append(burst)
                current = nil
            }
        }
        return result
    }

    /// LL packets per connection event, measured (see the type's description) on a link with this interval and
    /// LL data length; nil when no burst of at least ``minimumBurst`` packets was answered.
    public func packetsPerEvent(connectionIntervalMs: Double, dataLength: Int) -> Int? {
        let interval = connectionIntervalMs * 1000
        guard interval > 0, dataLength > 0 else { return nil }
        var best: Int?
        for burst in bursts where burst.packets >= Self.minimumBurst {
            let fragments = (burst.attBytes + 4 + dataLength - 1) / dataLength
            let elapsed = Double(burst.answeredMicros - burst.firstSentMicros)
            let events = max(1, Int((elapsed / interval).rounded()) - 1)
            let perEvent = (burst.packets * fragments + events - 1) / events
            best = max(best ?? 0, perEvent)
        }
        return best
    }
}

extension DeviceLink {
    /// The link from the "link: ..." line, with the MTU and the packets per event the capture shows (6, as
    /// assumed before, when it shows none); nil without a usable line.
    public init?(reportLine line: String, capture: DeviceCapture?) {
        guard var link = DeviceLink(reportLine: line) else { return nil }
        link.mtu = capture?.mtu ?? 23
        if let measured = capture?.packetsPerEvent(
            connectionIntervalMs: link.connectionIntervalMs, dataLength: link.dataLength)
        {
            link.packetsPerEvent = measured
            link.packetsPerEventMeasured = true
        }
        self = link
    }
}
