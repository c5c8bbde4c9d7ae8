/// One queued flash operation.
public struct FlashOperation: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        case erase(pages: Int)
        case write(bytes: [UInt8])
    }
    /// Offset in the update bank.
    public var offset: Int
    public var kind: Kind
    /// Device time at which the operation completes.
    public var completesAt: Duration

    public var description: String {
        switch kind {
        case .erase(let pages): "erase \(pages) page(s) at \(offset)"
        case .write(let bytes): "write \(bytes.count) byte(s) at \(offset)"
        }
    }
}

/// The update bank of the device's flash with a serial operation queue, as `nrf_fstorage` runs it.
///
/// Operations complete one after the other; each takes its modelled time (erase: pages × page erase time; write:
/// words × word write time, both divided by the speedup and multiplied by a slow-flash factor). What completed is
/// in `bank` and survives power loss; what is still queued is lost with it. Time is passed in (`now`, device time),
/// so the model is pure.
public struct FlashModel: Sendable {
    public private(set) var parameters: FlashParameters
    /// Completed contents of the update bank (erased bytes are 0xFF).
    public private(set) var bank: [UInt8] = []
    public private(set) var pending: [FlashOperation] = []
    /// Multiplies every flash duration (slow-flash fault).
    public var slowdown: Double = 1
    var speedup: Double

    public init(parameters: FlashParameters, speedup: Double = 1) {
        self.parameters = parameters
        self.speedup = speedup > 0 ? speedup : 1
    }

    /// Applies every operation that completed by `now`.
    public mutating func retire(now: Duration) {
        while let first = pending.first, first.completesAt <= now {
            pending.removeFirst()
            apply(first)
        }
    }

    /// Queued operations at `now` (after retiring the completed ones).
    public mutating func queued(now: Duration) -> Int {
        retire(now: now)
        return pending.count
    }

    /// Queued writes (they hold a receive buffer each).
    public var queuedWrites: Int {
        pending.reduce(0) { count, op in
            if case .write = op.kind { return count + 1 }
            return count
        }
    }

    /// When the queue is empty.
    public var idleAt: Duration? { pending.last?.completesAt }

    func duration(micros: Double) -> Duration {
        .nanoseconds(Int64((micros * 1000 * max(slowdown, 0) / speedup).rounded()))
    }

    /// Queues an erase of `pages` pages from `offset`; returns the operation, or nil when the queue is full
    /// (`nrf_fstorage_erase` fails with NRF_ERROR_NO_MEM: one queue entry per call, whatever the page count).
    @discardableResult
    public mutating func erase(offset: Int, pages: Int, now: Duration) -> FlashOperation? {
        retire(now: now)
        guard pending.count < max(parameters.queueDepth, 1) else { return nil }
        let start = max(now, pending.last?.completesAt ?? now)
        let op = FlashOperation(
            offset: offset, kind: .erase(pages: pages),
            completesAt: start + duration(micros: Double(pages) * parameters.pageEraseMicros))
        pending.append(op)
        return op
    }

    /// Queues a write; nil when the queue is full (the SDK drops the data).
    public mutating func write(offset: Int, bytes: [UInt8], now: Duration) -> FlashOperation? {
        retire(now: now)
        guard pending.count < max(parameters.queueDepth, 1) else { return nil }
        let start = max(now, pending.last?.completesAt ?? now)
        let words = Double((bytes.count + 3) / 4)
        let op = FlashOperation(
            offset: offset, kind: .write(bytes: bytes),
            completesAt: start + duration(micros: words * parameters.wordWriteMicros))
        pending.append(op)
        return op
    }

    /// Fills the free queue slots with operations outside the update bank (another module's page erases, as fds or
    /// the peer manager queue them), one page erase each.
    public mutating func fill(now: Duration) {
        retire(now: now)
        while pending.count < max(parameters.queueDepth, 1) {
            let start = max(now, pending.last?.completesAt ?? now)
            pending.append(
                FlashOperation(
                    offset: -1, kind: .erase(pages: 1), completesAt: start + duration(micros: parameters.pageEraseMicros)))
        }
    }

    /// Power loss at `now`: completed operations stay, queued ones are lost.
    public mutating func powerLoss(now: Duration) {
        retire(now: now)
        pending.removeAll()
    }

    /// Completes everything at once (a reset waits for the queue).
    public mutating func drain() {
        while !pending.isEmpty { apply(pending.removeFirst()) }
    }

    /// The first `count` bytes of the bank.
    public func contents(count: Int) -> [UInt8] {
        let available = Array(bank.prefix(count))
        return available + [UInt8](repeating: 0xFF, count: max(0, count - available.count))
    }

    private mutating func apply(_ op: FlashOperation) {
        guard op.offset >= 0 else { return }
        switch op.kind {
        case .erase(let pages):
            let end = op.offset + max(pages, 0) * parameters.pageSize
            grow(to: end)
            bank.withUnsafeMutableBufferPointer { bank in
                UnsafeMutableBufferPointer(rebasing: bank[op.offset..<end]).update(repeating: 0xFF)
            }
        case .write(let bytes):
            grow(to: op.offset + bytes.count)
            // NOR flash only clears bits: a write over unerased bytes ANDs.
            bank.withUnsafeMutableBufferPointer { bank in
                bytes.withUnsafeBufferPointer { bytes in
                    for index in bytes.indices { bank[op.offset + index] &= bytes[index] }
                }
            }
        }
    }

    /// Loads `bytes` as the completed contents of the bank from offset 0 (after a power cycle: nothing queued).
    public mutating func restore(bank bytes: [UInt8]) {
        pending.removeAll()
        bank = bytes
    }

    private mutating func grow(to count: Int) {
        if bank.count < count { bank += [UInt8](repeating: 0xFF, count: count - bank.count) }
    }
}
