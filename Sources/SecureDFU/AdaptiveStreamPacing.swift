/// `adaptive`, the default write mode: a value-type state machine that learns, per connection, how fast a device
/// takes data. It has no clock and no knowledge of the device model; it adapts from checkpoint outcomes only.
///
/// - **Checkpoint interval** (packets between checkpoints). It starts at ``Tuning/initialInterval`` with Calculate
///   Checksum checkpoints and doubles after each clean checkpoint. Once it covers a whole data object the policy
///   *streams*: each object goes out in one burst, checked once at its end. A shortfall, a CRC mismatch or a
///   timeout halves the interval, which brings checkpoints inside objects back.
/// - **Receipts instead of checksums.** After ``Tuning/receiptsAfterCleanObjects`` clean objects in a row, the
///   checkpoint of an object's last burst becomes the Packet Receipt Notification that falls on its last packet
///   (PRN = packets per object; the device counts from Create): no request round trip. A receipt carries the
///   same offset and CRC as a checksum answer, so a loss still shows at once when the device counted the lost
///   write (a full flash queue: the SDK counts it and reports offset 0). A write dropped for want of a receive
///   buffer is not counted, and then the receipt never comes: the engine waits ``Tuning/receiptTimeout`` for it
///   (not the full checkpoint timeout), asks with Calculate Checksum, and receipts end for the connection. Any
///   failed checkpoint also goes back to checksums until the objects are clean again.
/// - **Prepare delay**, a pause after Create Data before the object's first packet. Bootloaders queue the page
///   erase on Create and drop packets that find the flash queue or the receive buffers full; a host faster than the
///   flash overruns them. The delay starts at ``Tuning/initialDelay`` (zero: a device that loses nothing never
///   waits, and a link without a model runs no timer for it); a start above zero halves after every
///   ``Tuning/confirmObjects`` clean objects while nothing was ever lost, down to zero. A loss
///   before anything came back clean since Create (at most once per object) marks the delay as too short and raises
///   it (``Tuning/delayStep``, then doubling, up to ``Tuning/maximumDelay``); a delay that carried
///   ``Tuning/confirmObjects`` objects in a row cleanly is enough. Between the longest delay too short and the
///   shortest enough the policy bisects until they are within ``Tuning/delayTolerance`` of each other.
/// - **Losses later in an object** (after a clean checkpoint in it) mean the device writes slower than the link
///   delivers: the interval halves and is capped there until ``Tuning/receiptsAfterCleanObjects`` objects went
///   through cleanly, so the checkpoints inside objects pace the link.
/// - **The sustainable burst.** A loss in a burst longer than any that came back clean, or right after Create at a
///   prepare delay that already carried an object cleanly (a loaded host lets a long burst through now and then),
///   is blamed on the burst's length, not on the prepare delay: a device whose flash queue is short and whose flash
///   writes a packet slower than the link carries one (the lossy bracelet: 4.1 ms against 3.75 ms, queue of 2)
///   overflows after about a dozen packets back to back however long it waited. The longest clean burst shorter
///   than the lost one becomes ``burstLimit``; objects then go out in bursts of that length with a checkpoint in
///   between (its round trip lets the flash catch up), the last one ending with the receipt. After
///   ``Tuning/confirmObjects`` clean objects the limit tries halfway to the burst that was too long, so it settles
///   at the longest burst the device takes.
/// - **Paced bursts** (``Tuning/pauseStep``, issue 18). Once a burst limit is known and the prepare delay has carried
///   an object, the bursts of an object are paced instead of checked: all but the last go out with no checkpoint,
///   each followed by a pause of ``pause`` *per packet of the burst*, and only the object's last burst is checked
///   (its receipt or a checksum). The pause starts when the burst is handed to the link, which queues it (a Linux
///   L2CAP socket and the simulator's link both do), so a pause shorter than the burst's air time leaves no gap on
///   the air; a pause per packet makes the host's pace one packet per ``pause`` whatever the burst's length: below
///   the link's own pace it costs nothing, above it the device's flash gets the time it needs (the lossy bracelet
///   writes a packet in 4.1 ms where its link carries one every 3.75 ms). The pause starts at
///   ``Tuning/pauseStep``, halves after every ``Tuning/confirmObjects`` clean paced objects while no paced object
///   was lost, doubles after a loss in a paced object (then bisects between the longest pause too short and the
///   shortest enough, like the prepare delay); the engine's slow-down doubles it too. Pacing ends for the
///   connection (checkpoints between bursts again) only when the pause would exceed ``Tuning/maximumPause``.
///
/// Events in: ``nextBurst(packetsLeftInObject:)``, ``record(_:)`` (each checkpoint), ``slowDown()`` (the engine's
/// "too many failures in a row"). Decisions out: ``PacingBurst``, ``packetReceiptInterval`` and
/// ``delayAfterCreate(objectIndex:)``. ``snapshot`` / ``init(resuming:tuning:)`` carry what one connection learned
/// into the next connection to the same device.
public struct AdaptiveStreamPacing: PacingPolicy {
    /// The constants of the adaptation.
    public struct Tuning: Hashable, Sendable {
        /// Packets between checkpoints at the start.
        public var initialInterval: Int
        /// The prepare delay at the start (zero: none until something was lost).
        public var initialDelay: Duration
        /// The first prepare delay after a loss at zero delay (about half a page erase on nRF52).
        public var delayStep: Duration
        /// The largest prepare delay.
        public var maximumDelay: Duration
        /// Clean objects in a row that confirm a prepare delay as enough.
        public var confirmObjects: Int
        /// Bisection stops when (enough − too short) ≤ enough × this.
        public var delayTolerance: Double
        /// Clean objects in a row before object checkpoints become receipts; also how many clean objects lift an
        /// interval cap.
        public var receiptsAfterCleanObjects: Int
        /// How long the engine waits for a receipt before asking with Calculate Checksum.
        public var receiptTimeout: Duration
        /// The first pause per packet of a paced burst (nil: no paced bursts, a checkpoint between limited bursts).
        public var pauseStep: Duration?
        /// A pause per packet longer than this ends pacing for the connection (checkpoints pace better then).
        public var maximumPause: Duration

        public init(
            initialInterval: Int = 4, initialDelay: Duration = .zero, delayStep: Duration = .milliseconds(40),
            maximumDelay: Duration = .seconds(1),
            confirmObjects: Int = 3, delayTolerance: Double = 0.3, receiptsAfterCleanObjects: Int = 3,
            receiptTimeout: Duration = .seconds(2), pauseStep: Duration? = .milliseconds(2),
            maximumPause: Duration = .milliseconds(16)
        ) {
            self.receiptTimeout = receiptTimeout
            self.pauseStep = pauseStep
            self.maximumPause = maximumPause
            self.initialInterval = max(1, initialInterval)
            self.initialDelay = max(.zero, initialDelay)
            self.delayStep = delayStep
            self.maximumDelay = maximumDelay
            self.confirmObjects = max(1, confirmObjects)
            self.delayTolerance = min(max(delayTolerance, 0.01), 1)
            self.receiptsAfterCleanObjects = max(0, receiptsAfterCleanObjects)
        }
    }

    /// What a connection learned (for the next connection to the same device).
    public struct Snapshot: Hashable, Sendable, Codable {
        public var interval: Int
        public var objectPackets: Int
        public var prepareDelayMicros: Int64
        public var delayTooShortMicros: Int64?
        public var delayEnoughMicros: Int64?
        /// A receipt never came on that connection: no receipts.
        public var failed: Bool
        /// The learned burst limit (absent in snapshots of older versions).
        public var burstLimit: Int?
        /// The learned pause per packet of a paced burst (absent: none learned, or an older version).
        public var pauseMicros: Int64?
    }

    public let tuning: Tuning
    /// Packets between checkpoints (≥ ``objectPackets`` means streaming whole objects).
    public internal(set) var interval: Int
    /// Packets in the largest data object seen so far (0 before the first burst).
    public internal(set) var objectPackets = 0
    /// Upper bound of ``interval`` after losses inside objects or ``slowDown()`` (nil: none).
    public internal(set) var intervalCap: Int?
    /// The longest burst the device takes back to back, learned per connection (nil: no limit found).
    public internal(set) var burstLimit: Int?
    /// The shortest burst that lost packets because of its length.
    public internal(set) var burstTooLong: Int?
    /// The longest burst that came back clean.
    public internal(set) var longestCleanBurst = 0
    /// Packets in the burst handed out last.
    var lastBurstPackets = 0
    /// Burst lengths that came back clean.
    var cleanBurstLengths: Set<Int> = []
    /// The shortest prepare delay that carried an object cleanly.
    public internal(set) var shortestCleanDelay: Duration?
    /// The prepare delays that carried an object cleanly, each with the object's first burst (packets back to back
    /// after the delay): a delay is proven only for first bursts no longer than one it carried. An object that
    /// started with one packet and a checksum's round trip gave the erase that round trip too.
    var provenDelays: [(firstBurst: Int, delay: Duration)] = []
    /// Packets in the current object's first burst (0: none handed out since Create).
    var objectFirstBurst = 0
    /// Packets handed out since Create in the current object, and where the last burst began among them.
    var objectPacketsSent = 0
    var burstStart = 0
    /// Where the engine located the loss the next failed checkpoint reports (packets since Create).
    var lossAt: Int?
    /// The current object lost packets since Create (a shortfall continues inside it).
    var objectLost = false
    /// Clean objects in a row at one prepare delay: the first bursts of the last ``Tuning/confirmObjects``.
    var streak: (delay: Duration, firstBursts: [Int])?
    var cleanObjectsAtLimit = 0
    /// The pause after Create Data.
    public internal(set) var prepareDelay: Duration
    /// The longest prepare delay that lost packets.
    public internal(set) var delayTooShort: Duration?
    /// The shortest prepare delay that carried ``Tuning/confirmObjects`` objects cleanly.
    public internal(set) var delayEnough: Duration?
    public internal(set) var cleanCheckpoints = 0
    public internal(set) var failedCheckpoints = 0
    /// Objects whose closing checkpoint came back clean since the last failure.
    public internal(set) var cleanObjectsInARow = 0
    var cleanObjectsAtDelay = 0
    var cleanObjectsSinceCap = 0
    /// The burst handed out last runs to the end of the object, so its checkpoint closes the object.
    var burstEndsObject = false
    /// A receipt did not come (the device drops writes without counting them): checksums only.
    public internal(set) var receiptsBroken = false
    /// The burst handed out last ends with a receipt.
    var burstUsesReceipt = false
    /// The pause per packet of a paced burst (nil: not pacing).
    public internal(set) var pause: Duration?
    /// The longest pause a paced object was lost at, and the shortest that carried ``Tuning/confirmObjects`` objects.
    public internal(set) var pauseTooShort: Duration?
    public internal(set) var pauseEnough: Duration?
    /// Pacing was tried and ended for this connection (a pause beyond ``Tuning/maximumPause`` was needed).
    public internal(set) var pacingEnded = false
    var cleanObjectsAtPause = 0
    /// The object in progress had paced bursts (its closing checkpoint judges the pause).
    var objectPaced = false
    /// No clean checkpoint since Create Data yet: losses now point at the prepare delay.
    var freshObject = true
    /// The prepare delay was already found too short for the current object.
    var delayFailedForObject = false

    public init(tuning: Tuning = Tuning()) {
        self.tuning = tuning
        self.interval = tuning.initialInterval
        self.prepareDelay = tuning.initialDelay
    }

    /// Starts from what an earlier connection to the same device learned.
    public init(resuming snapshot: Snapshot, tuning: Tuning = Tuning()) {
        self.init(tuning: tuning)
        interval = max(1, snapshot.interval)
        objectPackets = max(0, snapshot.objectPackets)
        prepareDelay = .microseconds(max(0, snapshot.prepareDelayMicros))
        delayTooShort = snapshot.delayTooShortMicros.map { .microseconds(max(0, $0)) }
        delayEnough = snapshot.delayEnoughMicros.map { .microseconds(max(0, $0)) }
        receiptsBroken = snapshot.failed
        burstLimit = snapshot.burstLimit.map { max(1, $0) }
        longestCleanBurst = burstLimit ?? 0
        if tuning.pauseStep != nil { pause = snapshot.pauseMicros.map { .microseconds(max(0, $0)) } }
    }

    public var snapshot: Snapshot {
        Snapshot(
            interval: interval, objectPackets: objectPackets, prepareDelayMicros: Self.micros(prepareDelay),
            delayTooShortMicros: delayTooShort.map(Self.micros), delayEnoughMicros: delayEnough.map(Self.micros),
            failed: receiptsBroken, burstLimit: burstLimit, pauseMicros: pause.map(Self.micros))
    }

    /// Whole objects in one burst.
    public var isStreaming: Bool { objectPackets > 1 && interval >= objectPackets }

    /// The object's last burst ends with the receipt on its last packet instead of Calculate Checksum.
    public var usesReceipts: Bool {
        objectPackets > 1 && !receiptsBroken && cleanObjectsInARow >= tuning.receiptsAfterCleanObjects
    }

    public var packetReceiptInterval: UInt16 { usesReceipts ? UInt16(clamping: objectPackets) : 0 }

    public func delayAfterCreate(objectIndex: Int) -> Duration? { prepareDelay > .zero ? prepareDelay : nil }

    public var receiptTimeout: Duration? { tuning.receiptTimeout }

    public mutating func nextBurst(packetsLeftInObject: Int) -> PacingBurst {
        let burst = plannedBurst(packetsLeftInObject: packetsLeftInObject)
        let packets = max(1, min(burst.packets, max(1, packetsLeftInObject)))
        if objectFirstBurst == 0 { objectFirstBurst = packets }
        burstStart = objectPacketsSent
        objectPacketsSent += packets
        return burst
    }

    mutating func plannedBurst(packetsLeftInObject: Int) -> PacingBurst {
        let left = max(1, packetsLeftInObject)
        // The largest object so far (the first one): stream only once the interval covers it.
        objectPackets = max(objectPackets, left)
        if isStreaming {
            burstEndsObject = true
            burstUsesReceipt = usesReceipts
            lastBurstPackets = left
            return PacingBurst(packets: left, checkpoint: burstUsesReceipt ? .packetReceipt : .checksum)
        }
        if let pause, let burstLimit, left > burstLimit {
            // Paced: the device cannot take the rest back to back; a pause instead of a checkpoint's round trip.
            objectPaced = true
            burstEndsObject = false
            burstUsesReceipt = false
            lastBurstPackets = burstLimit
            return PacingBurst(packets: burstLimit, checkpoint: .none, pause: pause * burstLimit)
        }
        burstEndsObject = interval >= left
        // The object's last burst can end with its receipt too (the device counts from Create).
        burstUsesReceipt = burstEndsObject && usesReceipts && left < objectPackets
        lastBurstPackets = min(interval, left)
        return PacingBurst(packets: interval, checkpoint: burstUsesReceipt ? .packetReceipt : .checksum)
    }

    public mutating func record(_ outcome: CheckpointOutcome) {
        switch outcome {
        case .clean:
            cleanCheckpoints += 1
            freshObject = false
            longestCleanBurst = max(longestCleanBurst, lastBurstPackets)
            cleanBurstLengths.insert(lastBurstPackets)
            var grown = interval * 2
            if let intervalCap { grown = min(grown, intervalCap) }
            if let burstLimit { grown = min(grown, burstLimit) }
            // Beyond one object there is nothing more to gain.
            interval = objectPackets > 0 ? min(grown, max(objectPackets, 1)) : grown
            if burstEndsObject { objectClosedCleanly() }
        case .shortfall, .mismatch, .timeout:
            failedCheckpoints += 1
            if outcome == .timeout, burstUsesReceipt { receiptsBroken = true }
            cleanObjectsInARow = 0
            let lostAt = lossAt
            lossAt = nil
            streak = nil
            defer { if outcome == .shortfall { objectLost = true } }
            // A shortfall continues inside the object from the first lost packet.
            if outcome == .shortfall, let lostAt { objectPacketsSent = min(objectPacketsSent, lostAt) }
            if objectPaced, pause != nil, pacedObjectLost(outcome, lostAt: lostAt) { return }
            objectPaced = false
            let longerThanClean = longestCleanBurst > 0 && lastBurstPackets > longestCleanBurst
            // A delay that carried an object as fast (as long a first burst) is not to blame for a loss after Create;
            // a loss the engine located in the first burst at a delay not proven for it is the delay's.
            let delaysLoss = freshObject && !delayProven && lostAt.map { $0 < objectFirstBurst } == true
            if lastBurstPackets > 1, !delaysLoss, longerThanClean || (freshObject && delayProven) {
                burstTooLongLost(outcome, lostAt: lostAt)
                return
            }
            interval = max(1, min(interval, max(objectPackets, 1)) / 2)
            if freshObject {
                // Lost before anything came back clean since Create Data: the device was still busy (erasing,
                // writing the previous object).
                if !delayFailedForObject { delayTooShortNow() }
                delayFailedForObject = true
            } else {
                // Lost after a clean checkpoint in the same object: the device writes slower than the link delivers.
                intervalCap = interval
                cleanObjectsSinceCap = 0
            }
            // A mismatch makes the engine create the object again; a shortfall continues inside it.
            if outcome == .mismatch { startObject() }
        }
        burstEndsObject = false
        burstUsesReceipt = false
    }

    public mutating func lossLocated(atPacket index: Int) { lossAt = max(0, index) }

    public mutating func slowDown() {
        if pause != nil {
            // Paced: too many losses in a row say the pause is too short (ending pacing past the maximum).
            pauseTooShortNow()
            delayTooShortNow()
            if pause != nil { return }
        } else {
            delayTooShortNow()
        }
        intervalCap = max(1, tuning.initialInterval / 2)
        cleanObjectsSinceCap = 0
        interval = 1
    }

    /// The current prepare delay carried objects cleanly whose first burst was at least as long as this one's.
    var delayProven: Bool {
        provenDelays.contains { $0.delay <= prepareDelay && $0.firstBurst >= objectFirstBurst }
    }

    mutating func startObject() {
        objectLost = false
        objectFirstBurst = 0
        objectPacketsSent = 0
        burstStart = 0
        freshObject = true
        delayFailedForObject = false
    }

    mutating func objectClosedCleanly() {
        shortestCleanDelay = min(shortestCleanDelay ?? prepareDelay, prepareDelay)
        proveDelay()
        if objectPaced { pausedObjectClosedCleanly() }
        objectPaced = false
        cleanObjectsInARow += 1
        startObject()
        cleanObjectsSinceCap += 1
        if cleanObjectsSinceCap >= max(tuning.receiptsAfterCleanObjects, 1) { intervalCap = nil }
        probeLongerBursts()
        cleanObjectsAtDelay += 1
        guard cleanObjectsAtDelay >= tuning.confirmObjects else { return }
        guard let tooShort = delayTooShort else {
            // Nothing lost yet: the device may not need the delay at all.
            let half = Self.micros(prepareDelay) / 2
            prepareDelay = half < 5_000 ? .zero : .microseconds(half)
            cleanObjectsAtDelay = 0
            return
        }
        let enough = min(delayEnough ?? prepareDelay, prepareDelay)
        delayEnough = enough
        cleanObjectsAtDelay = 0
        if Self.micros(enough - tooShort) > Int64(Double(Self.micros(enough)) * tuning.delayTolerance) {
            prepareDelay = .microseconds((Self.micros(tooShort) + Self.micros(enough)) / 2)
        } else {
            prepareDelay = enough
        }
    }

    public var description: String { "adaptive" }

    /// Whole microseconds (truncated).
    static func micros(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
    }
}
