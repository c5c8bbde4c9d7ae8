import DFUProtocol

extension SecureDFUStateMachine {
    mutating func dataSelected(_ info: ObjectInfo) -> [DFUAction] {
        let maxSize = Int(info.maxSize)
        guard maxSize > 0 else { return violation("Select Data reports a maximum object size of 0") }
        objects = DFUPlanning.objectRanges(imageSize: part.image.count, maxObjectSize: maxSize)
        let decision = DFUPlanning.dataResumeDecision(
            image: image, maxObjectSize: maxSize, remote: info, executedOffset: configuration.executedOffset)
        switch decision {
        case .start: return createData(0)
        case .executeAgain(let index):
            objectIndex = index
            sentOffset = objects[index].upperBound
            return request(.execute, .executeData(again: true))
        case .continueObject(let index, let offset):
            objectIndex = index
            sentOffset = offset
            stall.confirmed(offset)
            return [.progress(progress)] + streamNext()
        case .recreate(let index): return createData(index)
        case .restartFromScratch:
            guard !restartedFromScratch else {
                return violation("device data still inconsistent after a restart (offset \(info.offset))")
            }
            restartedFromScratch = true
            configuration.executedOffset = nil
            return createCommand()
        }
    }

    mutating func createData(_ index: Int) -> [DFUAction] {
        objectIndex = index
        sentOffset = objects[index].lowerBound
        stall.rewound(to: sentOffset)
        return request(.create(type: .data, size: UInt32(objects[index].count)), .createData)
    }

    /// Sends the next burst of the current object, or ends the object with a checkpoint.
    mutating func streamNext() -> [DFUAction] {
        let prn = configuration.pacing.packetReceiptInterval
        if prn != configuredPRN || needsPRNResync {
            // A new interval after slowing down, or a receipt counter out of step after lost packets:
            // Set PRN reloads the device's counter (nrf_dfu_ble.c).
            configuredPRN = prn
            return request(.setPRN(prn), .setPRNForData(thenSelect: false))
        }
        let end = objects[objectIndex].upperBound
        guard sentOffset < end else { return objectEndCheckpoint() }
        let left = DFUPlanning.packetCount(end - sentOffset, packetSize: packetSize)
        let burst = configuration.pacing.nextBurst(packetsLeftInObject: left)
        var count = min(burst.packets, left)
        if burst.checkpoint == .none, burst.pause == nil { count = left }
        if burst.checkpoint == .packetReceipt, configuredPRN > 0 {
            let interval = Int(configuredPRN)
            count = min(left, interval - packetsSinceReceiptReset % interval)
        }
        burstEnd = min(end, sentOffset + count * packetSize)
        step = .sendingData(burst)
        let packets = DFUPlanning.packets(in: sentOffset..<burstEnd, packetSize: packetSize)
        return [.sendPackets(DFUPacketBurst(source: .firmware, packets: packets))]
    }

    mutating func burstWritten(_ burst: PacingBurst) -> [DFUAction] {
        packetsSinceReceiptReset += DFUPlanning.packetCount(burstEnd - sentOffset, packetSize: packetSize)
        sentOffset = burstEnd
        if sentOffset == objects[objectIndex].upperBound { return objectEndCheckpoint() }
        switch burst.checkpoint {
        case .packetReceipt where receiptDue: return waitForReceipt()
        case .packetReceipt, .checksum: return request(.calculateChecksum, .checksumData)
        case .none:
            if let pause = burst.pause {
                step = .pause
                return [armTimer(pause)]
            }
            return streamNext()
        }
    }

    var receiptDue: Bool {
        configuredPRN > 0 && packetsSinceReceiptReset > 0 && packetsSinceReceiptReset % Int(configuredPRN) == 0
    }

    /// The object is written: use the PRN that falls on its last packet, if one does, else Calculate Checksum.
    /// (Never both outstanding: a PRN and a checksum response are the same bytes.)
    mutating func objectEndCheckpoint() -> [DFUAction] {
        receiptDue ? waitForReceipt() : request(.calculateChecksum, .checksumData)
    }

    mutating func waitForReceipt() -> [DFUAction] {
        step = .waitingReceipt
        let limit = configuration.pacing.receiptTimeout ?? configuration.checkpointTimeout
        let timerAction = armTimer(min(configuration.checkpointTimeout, limit))
        if let early = earlyReport {
            earlyReport = nil
            return receipt(offset: early.offset, crc: early.crc)
        }
        return [timerAction]
    }

    /// A Packet Receipt Notification. SDK 15-17 send one for every PRN-th handled write, also for a write that a
    /// full flash queue dropped, and then its payload is the zero-initialised response (offset 0, CRC 0;
    /// `on_data_obj_write_request`, nrf_dfu_req_handler.c): not where the device is. Past the first object that
    /// cannot be a true report, so ask with Calculate Checksum (the answer is the real offset: usually a shortfall
    /// continued in place) instead of creating the object again.
    mutating func receipt(offset: Int, crc: UInt32) -> [DFUAction] {
        if offset == 0, crc == 0, objects[objectIndex].lowerBound > 0 {
            return request(.calculateChecksum, .checksumData)
        }
        return checkpoint(offset: offset, crc: crc)
    }

    /// Every checkpoint checks offset and CRC against what was sent.
    mutating func checkpoint(offset: Int, crc: UInt32) -> [DFUAction] {
        let start = objects[objectIndex].lowerBound
        let end = objects[objectIndex].upperBound
        let prefixMatches = image.matches(offset: offset, crc: crc)
        if offset == sentOffset, prefixMatches {
            failures = 0
            lossInARow = false
            stall.confirmed(offset)
            configuration.pacing.record(.clean)
            if sentOffset == end { return [.progress(progress)] + request(.execute, .executeData(again: false)) }
            return [.progress(progress)] + streamNext()
        }
        if offset > sentOffset {
            return violation("device reports offset \(offset) but only \(sentOffset) bytes were sent")
        }
        if offset >= start, prefixMatches {
            // Lost packets with an intact prefix: continue inside the object. A report that moved the device's offset
            // is progress (it took data, only less than was sent), not a failure to wait on or give up on.
            bytesResent += sentOffset - offset
            sentOffset = offset
            configuration.pacing.lossLocated(atPacket: (offset - start) / max(packetSize, 1))
            configuration.pacing.record(.shortfall)
            if configuredPRN > 0 { needsPRNResync = true }
            let moved = stall.confirmed(offset)
            countFailure(lostPackets: true)
            let lost = DFUEngineError(.bytesLost, "device has \(offset) of \(end) bytes")
            return moved ? streamNext() : retry(.stream, after: lost)
        }
        bytesResent += sentOffset - start
        let sent = DFUPlanning.packets(in: start..<sentOffset, packetSize: packetSize)
        if let lost = image.firstLostPacket(of: sent, offset: offset, crc: crc) {
            configuration.pacing.lossLocated(atPacket: lost)
        }
        configuration.pacing.record(.mismatch)
        countFailure(lostPackets: offset < sentOffset)
        return retry(
            .create,
            after: DFUEngineError(.crcMismatch, "object \(objectIndex): CRC 0x\(String(crc, radix: 16)) at offset \(offset)"))
    }

    mutating func checkpointTimedOut() -> [DFUAction] {
        silentTimeouts += 1
        if silentTimeouts >= 2 {
            // A receipt may get lost, a checksum request once too (a notification the device could not queue); two
            // silent checkpoints in a row mean the device stopped answering: fail within 2 × the timeout, no hang.
            return fail(
                DFUEngineError(
                    .timeout, "the device stopped answering: no receipt or checksum within 2 × \(configuration.checkpointTimeout)"))
        }
        configuration.pacing.record(.timeout)
        if configuredPRN > 0 { needsPRNResync = true }
        // The timer that fired: the receipt wait (at most the checkpoint timeout) or the checkpoint timeout.
        var waited = configuration.checkpointTimeout
        if step == .waitingReceipt, let receipt = configuration.pacing.receiptTimeout { waited = min(waited, receipt) }
        stall.timedOut(after: waited)
        countFailure()
        let timeout = DFUEngineError(.timeout, "no receipt or checksum within \(configuration.checkpointTimeout)")
        if stall.failed(deviceBusy: false, waitedAlready: true) == .giveUp { return giveUp(timeout) }
        // Ask where the device is instead of waiting for a receipt that will not come (the timeout was the wait).
        return request(.calculateChecksum, .checksumData)
    }

    /// Create Data refused with Invalid Object (0x05): on SDK 15-17 the page erase could not be queued because the
    /// flash queue is full (`on_data_obj_create_request`); the same Create succeeds once the queue drained, so wait
    /// (``StallBudget``) and create again.
    mutating func createRefused(_ response: ControlPointResponse) -> [DFUAction] {
        retries += 1
        let refusal = DFUEngineError.remote(response.status, request: .create)
        return retry(.create, after: refusal, deviceBusy: true)
    }

    /// A try that failed without progress: again now, after a wait, or give up (``StallBudget``).
    mutating func retry(_ next: RetryAfterWait, after last: DFUEngineError, deviceBusy: Bool = false) -> [DFUAction] {
        switch stall.failed(deviceBusy: deviceBusy) {
        case .giveUp: return giveUp(last)
        case .retryNow: return next == .create ? createData(objectIndex) : streamNext()
        case .retryAfter(let wait):
            step = .retryWait(next)
            return [armTimer(wait)]
        }
    }

    mutating func giveUp(_ last: DFUEngineError) -> [DFUAction] {
        fail(DFUEngineError(.gaveUp, "gave up: \(stall.summary); last: \(last.reason)", status: last.status, request: last.request))
    }

    /// Counts a failed checkpoint for the pacing: slows down after `maxAttempts` in a row. When the failures since
    /// the last slow-down lost packets (`lostPackets`: the device had fewer bytes than sent) and slowing down again
    /// still shortens the bursts, it slows down again: a packet lost before the last one of a burst shifts the rest
    /// of the object on the device, which must then be created again, so on a link that loses packets only bursts
    /// short enough for losses to fall on their last packet (recovered in place) let large objects complete
    /// (docs/reliability.md, run 231 of seed 2). Whether to go on is the ``StallBudget``'s call, not this count's.
    mutating func countFailure(lostPackets: Bool = false) {
        retries += 1
        failures += 1
        if lostPackets { lossInARow = true }
        guard failures >= configuration.maxAttempts else { return }
        if !slowedDown || (lossInARow && slowDownShortensBursts()) {
            if !slowedDown { configuration.pacing.slowDown() }
            slowedDown = true
        }
        failures = 0
        lossInARow = false
    }

    /// Slows the pacing down once more if that makes its bursts (or its PRN interval) shorter.
    mutating func slowDownShortensBursts() -> Bool {
        var before = configuration.pacing
        var after = configuration.pacing
        after.slowDown()
        var probe = after
        let large = 1 << 20
        let shorter =
            probe.nextBurst(packetsLeftInObject: large).packets < before.nextBurst(packetsLeftInObject: large).packets
            || after.packetReceiptInterval < before.packetReceiptInterval
        if shorter { configuration.pacing = after }
        return shorter
    }

    mutating func dataObjectExecuted() -> [DFUAction] {
        let end = objects[objectIndex].upperBound
        let executed = DFUExecutedObject(index: objectIndex, offset: end, crc: image.crc(upTo: end) ?? 0)
        sentOffset = end
        var actions: [DFUAction] = [.objectExecuted(executed), .progress(progress)]
        if objectIndex == objects.count - 1 {
            step = .finished
            actions.append(.completed)
            return actions
        }
        // A safe point: everything sent so far is executed (and journaled by the driver before it acts on `failed`).
        if stopRequested { return actions + fail(stoppedError) }
        return actions + createData(objectIndex + 1)
    }
}
