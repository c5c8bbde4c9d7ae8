extension LegacyDeviceProfile {
    /// The most any host can carry over this Legacy device: the *Legacy protocol bound* for an application image of
    /// `imageSize` bytes in `packetSize`-byte packets, as an ideal host that knows the device model would send it.
    ///
    /// 1. Start DFU, then the sizes: the device erases first (dual bank: all of bank 1; single bank: the image; InfiniTime:
    ///    its 116 SPI NOR sectors) and answers after that. Two request round trips around it (`01`, then the init
    ///    packet's `02 00` / `02 01`), the PRN request and Receive Firmware Image: one each.
    /// 2. Packets back to back at the link's Write Command rate, each held back only as long as it would otherwise find
    ///    the RX buffers (`receive_buffers`) or the flash queue full: never a loss, never a wait longer than needed.
    ///    No receipts (they cost no link time but would make the host wait).
    /// 3. The answer to the last packet once its flash write completes, then Validate and Activate: a round trip each.
    ///
    /// InfiniTime writes to SPI NOR synchronously every 200 bytes inside the GATT callback, so its link stalls for
    /// each write. `bytesPerSecond` is the image over the whole time (erase included: it is part of every update).
    public func protocolBound(imageSize: Int, packetSize: Int = 20) -> ProtocolBound {
        let link = LinkModel(link: self.link, flash: flash)
        guard imageSize > 0 else { return ProtocolBound(objectMicros: 0, heldPackets: 0, bytesPerSecond: 0) }
        let roundTrip = link.requestRoundTripMicros
        let page = max(layout.pageSize, 1)
        let erase: Double
        switch kind {
        case .infinitime:
            erase = Double(InfiniTimeDFU.imageAreaSize / max(flash.pageSize, 1)) * flash.pageEraseMicros
        default:
            let bytes = dualBank ? layout.bankedSize(appStart: applicationStart) : imageSize
            erase = Double((bytes + page - 1) / page) * flash.pageEraseMicros
        }
        // Start, the sizes (answered after the erase), 02 00, the init packet, 02 01, PRN request, 03.
        var now = roundTrip + link.writeCommandMicros(attBytes: 15) + erase + roundTrip * 4
        var queue: [Double] = []  // completion times of queued flash writes (each holds an RX buffer)
        var held = 0
        var offset = 0
        var buffered = 0
        while offset < imageSize {
            let size = min(packetSize, imageSize - offset)
            var arrival = now + link.writeCommandMicros(attBytes: size + 3)
            if kind == .infinitime {
                buffered += size
                if buffered >= 200 || offset + size == imageSize {
                    arrival += link.flashWriteMicros(bytes: buffered)
                    buffered = 0
                }
            } else {
                let limit = min(max(receiveBuffers, 1), max(flash.queueDepth, 1))
                let pending = queue.filter { $0 > arrival }
                if pending.count >= limit, let free = pending.sorted().first {
                    arrival = free
                    held += 1
                }
                let start = max(arrival, queue.last ?? arrival)
                queue.append(start + link.flashWriteMicros(bytes: size))
            }
            now = arrival
            offset += size
        }
        let lastWritten = max(now, queue.last ?? now)
        let total = lastWritten + roundTrip * 2
        return ProtocolBound(objectMicros: total, heldPackets: held, bytesPerSecond: Double(imageSize) * 1_000_000 / total)
    }
}
