/// The most any write strategy can carry over a modelled device: the *protocol bound*.
///
/// It replays one full data object as an ideal host would send it, one that knows the device model exactly:
///
/// 1. Create Data reaches the device at t = 0. The flash is idle (the previous Execute waited for it, as
///    `on_data_obj_execute_request_sched` does on SDK 15-17) and starts the page erase.
/// 2. Packets follow back to back at the link's Write Command rate, each held back only as long as it would
///    otherwise find the flash queue (`queue_depth`) or the receive buffers (`receive_buffers`) full: the host never
///    loses a packet, and never waits longer than needed.
/// 3. The object's checkpoint is the receipt on its last packet, which costs no link time.
/// 4. Execute costs one request round trip after the last packet; the device answers once its flash queue is
///    empty. The next Create costs another round trip after that answer.
///
/// So one object takes `max(air + RT, erase + writes) + RT` when nothing throttles the packets, where RT is
/// `write_response_latency_events × CI`: the flash idles one round trip per object (Execute answer → next Create)
/// and the link idles while the flash finishes. Select, the init packet and a shorter last object are not counted
/// (about 1 % of a 128 KiB image). Requests are one at a time, as ATT requires and every host does.
public struct ProtocolBound: Sendable, Hashable {
    /// Time for one full data object, µs.
    public var objectMicros: Double
    /// Packets the ideal host had to hold back (the device could not take them yet).
    public var heldPackets: Int
    /// Bytes per second at that pace.
    public var bytesPerSecond: Double
}

extension LinkModel {
    /// The ideal host's pace for `objectSize`-byte data objects at ATT_MTU `mtu` (see ``ProtocolBound``).
    public func protocolBoundDetail(mtu: Int, objectSize: Int) -> ProtocolBound {
        let mtu = min(max(mtu, 23), link.maxMTU)
        let payload = max(mtu - 3, 1)
        guard objectSize > 0 else { return ProtocolBound(objectMicros: 0, heldPackets: 0, bytesPerSecond: 0) }
        let roundTrip = requestRoundTripMicros
        let queueDepth = max(flash.queueDepth, 1)
        let buffers = max(link.receiveBuffers, 1)
        // Completion times of queued flash operations (serial), and whether each is a write (holds a buffer).
        var queue: [(completes: Double, write: Bool)] = []
        let pages = (objectSize + flash.pageSize - 1) / max(flash.pageSize, 1)
        queue.append((Double(pages) * flash.pageEraseMicros, false))
        var linkFree = 0.0
        var held = 0
        var offset = 0
        while offset < objectSize {
            let size = min(payload, objectSize - offset)
            var arrival = linkFree + writeCommandMicros(attBytes: size + 3)
            var wasHeld = false
            while true {
                let pending = queue.filter { $0.completes > arrival }
                if pending.count < queueDepth, pending.filter(\.write).count < buffers { break }
                // Wait for the next operation to complete.
                arrival = pending.map(\.completes).min() ?? arrival
                wasHeld = true
            }
            if wasHeld { held += 1 }
            linkFree = arrival
            let start = max(arrival, queue.last?.completes ?? arrival)
            queue.append((start + flashWriteMicros(bytes: size), true))
            offset += size
        }
        let executeArrives = linkFree + roundTrip
        let executeAnswered = max(executeArrives, queue.last?.completes ?? executeArrives)
        let object = executeAnswered + roundTrip
        return ProtocolBound(
            objectMicros: object, heldPackets: held, bytesPerSecond: Double(objectSize) * 1_000_000 / object)
    }

    /// ``protocolBoundDetail(mtu:objectSize:)`` in bytes per second.
    public func protocolBound(mtu: Int, objectSize: Int) -> Double {
        protocolBoundDetail(mtu: mtu, objectSize: objectSize).bytesPerSecond
    }
}
