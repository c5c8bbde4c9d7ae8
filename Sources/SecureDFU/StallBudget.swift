/// The engine's retry budget, in time and progress (issue 18 point 1): a device is given up on only when it has
/// taken no new data for a while, never after a fixed number of attempts.
///
/// SDK 15-17 bootloaders ask for patience in two ways while their flash is busy (docs/simulator.md, "Flash queue
/// full"; `nrf_dfu_req_handler.c`):
/// - **Create Data answers Invalid Object (0x05)** when `nrf_dfu_flash_erase` cannot queue the page erase because
///   the fstorage queue is full (`on_data_obj_create_request`); the same Create succeeds once the queue drained.
/// - **Packet writes are dropped** while the queue is full (`on_data_obj_write_request`), so a checkpoint reports
///   fewer bytes than were sent, or (a packet dropped before the last one of a burst) a CRC that does not match.
///
/// A page erase takes up to 85 ms on nRF52 (nRF52832/nRF52840 product specifications, t_ERASEPAGE) and the queue
/// holds `NRF_FSTORAGE_SD_QUEUE_SIZE` = 16 operations in every secure bootloader example configuration, so a full
/// queue drains within 16 × 85 ms ≈ 1.4 s. Six immediate retries, as the engine used to allow, fit inside a single
/// erase. The budget therefore counts:
/// - **progress**: a checkpoint whose offset (with a matching CRC) moved past the device's offset at the previous
///   report, or past where a Create Data rewound it, is progress, even a shortfall (the device took data, only less
///   than was sent). It is no failure, and the tries and the time start afresh;
/// - **time**: every failed try that did not move the offset, after the first, waits before the engine tries again,
///   ``firstWait`` doubling up to ``longestWait`` (a refused Create waits from the first refusal: retrying at once is
///   pointless), and checkpoint timeouts count their own wait. These waits are timers on the driver's injected
///   clock, so the budget is time the engine provably let pass, whatever the host's speed.
///
/// The engine gives up when the offset has not moved for at least ``limit`` of such time *and* at least
/// ``minimumTries`` tries. With the defaults (10 s, 6 tries) the waits 0, 50, 100, 200, 400, 800 ms and then 1 s
/// each add up to 10 s after 16 tries: longer than any flash queue takes to drain (1.55 s already after the 6th).
/// Progress that only repeats ground (an object created again after a CRC mismatch reaching no further than before)
/// does not run forever either: after ``maximumTriesBelowMark`` failed tries that did not move the offset, without a
/// new furthest offset (``mark``) in between, the engine gives up as well. (Shortfalls that moved the offset do not
/// count: on a lossy link an object may take many passes, each ending in one mismatch.)
struct StallBudget: Hashable, Sendable {
    /// What to do after a failed try.
    enum Verdict: Hashable, Sendable {
        case retryNow
        case retryAfter(Duration)
        case giveUp
    }

    static let firstWait: Duration = .milliseconds(50)
    static let longestWait: Duration = .seconds(1)

    /// Time without progress after which the device has stopped accepting data.
    let limit: Duration
    /// Tries without progress the engine makes at least before giving up.
    let minimumTries: Int
    /// Failed tries without a new ``mark`` after which the engine gives up however the offset moves.
    let maximumTriesBelowMark: Int
    /// The furthest image offset the device ever confirmed on this connection.
    private(set) var mark = 0
    /// The device's offset as last confirmed, or as a Create Data rewound it.
    private(set) var offset = 0
    /// Failed tries since the offset last moved.
    private(set) var tries = 0
    /// Time the engine waited meanwhile (retry waits, checkpoint timeouts).
    private(set) var waited: Duration = .zero
    /// Failed tries since the mark last moved.
    private(set) var triesBelowMark = 0

    init(limit: Duration, minimumTries: Int) {
        self.limit = limit
        self.minimumTries = max(1, minimumTries)
        maximumTriesBelowMark = 64 * self.minimumTries
    }

    /// A Create Data: the device's offset is back at the object's start (`offset_last`).
    mutating func rewound(to start: Int) {
        offset = start
    }

    /// The device confirmed the image up to `confirmed` (offset and CRC). Returns true (and starts the budget
    /// afresh) when the offset moved.
    @discardableResult
    mutating func confirmed(_ confirmed: Int) -> Bool {
        if confirmed > mark {
            mark = confirmed
            triesBelowMark = 0
        }
        defer { offset = confirmed }
        guard confirmed > offset else { return false }
        tries = 0
        waited = .zero
        return true
    }

    /// The engine waited `duration` for an answer that did not come.
    mutating func timedOut(after duration: Duration) {
        waited += duration
    }

    /// A failed try that did not move the offset: a failed checkpoint, or a Create the device refused
    /// (`deviceBusy`: wait before the first retry too). `waitedAlready`: the try was a timeout, whose wait
    /// ``timedOut(after:)`` counted; the retry goes out at once.
    mutating func failed(deviceBusy: Bool, waitedAlready: Bool = false) -> Verdict {
        tries += 1
        triesBelowMark += 1
        if tries >= minimumTries, waited >= limit { return .giveUp }
        if triesBelowMark >= maximumTriesBelowMark { return .giveUp }
        if waitedAlready { return .retryNow }
        let doublings = tries - (deviceBusy ? 1 : 2)
        guard doublings >= 0 else { return .retryNow }
        var wait = Self.firstWait
        for _ in 0..<min(doublings, 16) where wait < Self.longestWait { wait = wait * 2 }
        wait = min(wait, Self.longestWait)
        waited += wait
        return .retryAfter(wait)
    }

    /// For people: "no new data past offset 4096 in 16 tries over 10.55 s".
    var summary: String {
        if triesBelowMark >= maximumTriesBelowMark {
            return "no data past offset \(mark) in \(triesBelowMark) tries"
        }
        let millis = waited / .milliseconds(1)
        let seconds = millis.truncatingRemainder(dividingBy: 1000) == 0 ? "\(Int(millis / 1000))" : "\(millis / 1000)"
        return "no new data past offset \(offset) in \(tries) tries over \(seconds) s"
    }
}
