import BLECore
import Synchronization

/// A device's end of a BlueZ link that takes every PDU out of the kernel as soon as it arrives and keeps it, in
/// order, until the device handles it.
///
/// Why: the ATT fixed channel (CID 4) has no flow control in the kernel. An incoming PDU that does not fit the
/// socket's receive buffer is freed (`l2cap_sock_recv_cb` → `__sock_queue_rcv_skb` fails; `l2cap_data_channel`
/// drops the skb), and nothing tells either side. A real peripheral never loses a Write Command: its controller
/// holds back the link-layer acknowledgement until it has a buffer, so the central's controller waits. A virtual
/// device that models air time (it sleeps per PDU before handling the next) reads its socket slowly, and on a
/// controller with no air in between (btvirt, a VM's vhci) a burst of Write Commands overflows the buffer: the SDK 11
/// simulator lost 157 packets of a 512-packet window that way and the flash restarted the image (vm-test "legacy").
/// Reading ahead into memory keeps every PDU, in order, so the device's timing model decides, not the kernel.
///
/// At most ``capacity`` PDUs are held; beyond that reading pauses (and the kernel's buffer is the limit again).
public final class ReadAheadBearer: ATTBearer {
    /// PDUs held at most (far more than any DFU window: Legacy's largest is 1024 packets).
    public static let defaultCapacity = 16_384

    private struct State {
        var queue: [[UInt8]] = []
        var head = 0
        /// How the link ended, delivered once the queue is drained.
        var end: BearerError?
        var consumer: CheckedContinuation<Void, Never>?
        var reader: CheckedContinuation<Void, Never>?
        var count: Int { queue.count - head }
    }

    private let link: any ATTBearer
    private let capacity: Int
    private let state = Mutex(State())

    /// Starts reading `link` at once; the reading ends with the link (its end or ``close()``).
    public init(_ link: any ATTBearer, capacity: Int = ReadAheadBearer.defaultCapacity) {
        self.link = link
        self.capacity = max(1, capacity)
        Task { [self] in await readLoop() }
    }

    public var linkInfo: LinkInfo { link.linkInfo }

    /// PDUs taken from the link and not yet received by the device.
    public var heldCount: Int { state.withLock { $0.count } }

    private func readLoop() async {
        while true {
            let room = await waitForRoom()
            let batch: [[UInt8]]
            do {
                batch = try await link.receive(upTo: min(64, room))
            } catch {
                finish(error)
                return
            }
            let consumer = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.queue += batch
                defer { state.consumer = nil }
                return state.consumer
            }
            consumer?.resume()
        }
    }

    /// How many more PDUs may be held (at least one), once there is room.
    private func waitForRoom() async -> Int {
        while true {
            let room = state.withLock { capacity - $0.count }
            if room > 0 { return room }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let full = state.withLock { state -> Bool in
                    guard state.count >= capacity, state.end == nil else { return false }
                    state.reader = continuation
                    return true
                }
                if !full { continuation.resume() }
            }
        }
    }

    private func finish(_ error: BearerError) {
        let consumer = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.end == nil { state.end = error }
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume()
    }

    public func receive() async throws(BearerError) -> [UInt8] {
        let batch = try await receive(upTo: 1)
        guard let first = batch.first else { throw BearerError(.closed, "bearer closed") }
        return first
    }

    /// The held PDUs (at most `maximumCount`), waiting for one when none is held; the link's end once drained.
    public func receive(upTo maximumCount: Int) async throws(BearerError) -> [[UInt8]] {
        while true {
            enum Step { case pdus([[UInt8]], CheckedContinuation<Void, Never>?), end(BearerError), wait }
            let step = state.withLock { state -> Step in
                if state.count > 0 {
                    let end = min(state.queue.count, state.head + max(1, maximumCount))
                    let taken = Array(state.queue[state.head..<end])
                    state.head = end
                    if state.head == state.queue.count || state.head >= 1024 {
                        state.queue.removeFirst(state.head)
                        state.head = 0
                    }
                    defer { state.reader = nil }
                    return .pdus(taken, state.reader)
                }
                if let end = state.end { return .end(end) }
                return .wait
            }
            switch step {
            case .pdus(let pdus, let reader):
                reader?.resume()
                return pdus
            case .end(let error): throw error
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = state.withLock { state -> Bool in
                        if state.count > 0 || state.end != nil { return true }
                        state.consumer = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            }
        }
    }

    public func send(_ pdu: [UInt8]) async throws(BearerError) { try await link.send(pdu) }

    public func send(burst pdus: [[UInt8]]) async throws(BearerError) { try await link.send(burst: pdus) }
    public func send(burst payloads: [ArraySlice<UInt8>], prefix: [UInt8]) async throws(BearerError) {
        try await link.send(burst: payloads, prefix: prefix)
    }

    /// Closes the link; the held PDUs are dropped and receives end with `.closed` (as the socket's would).
    public func close() async {
        await link.close()
        let (consumer, reader) = state.withLock { state in
            state.queue = []
            state.head = 0
            state.end = BearerError(.closed, "bearer closed")
            defer {
                state.consumer = nil
                state.reader = nil
            }
            return (state.consumer, state.reader)
        }
        consumer?.resume()
        reader?.resume()
    }

    public func securityLevel() async -> LinkSecurityLevel { await link.securityLevel() }

    public func raiseSecurity(to level: LinkSecurityLevel) async throws(BearerError) -> LinkSecurityLevel {
        try await link.raiseSecurity(to: level)
    }
}
