import DFUPackage

extension LegacyDFUStateMachine {
    // MARK: - Notifications

    mutating func received(_ notification: LegacyNotification) -> [LegacyDFUAction] {
        switch notification {
        case .packetReceipt(let bytes): return receipt(Int(bytes))
        case .receivedImageSize(let bytes):
            guard case .askingSize(let final) = step else {
                // A second answer to a repeated question (asked after a timeout, answered late) is harmless.
                if bytes == sentOffset, step == .validating { return [] }
                return violation("unexpected received-size report (\(bytes) bytes) \(whereWeAre)")
            }
            return sizeReported(Int(bytes), final: final)
        case .response(let request, let status):
            switch (step, request) {
            case (.starting, .startDFU): return started(status)
            case (.initializing(complete: true), .initialize): return initialized(status)
            case (.sendingData, .receiveFirmwareImage), (.waitingReceipt(_), .receiveFirmwareImage),
                (.waitingLastPacket, .receiveFirmwareImage), (.askingSize, .receiveFirmwareImage):
                return dataAnswered(status)
            case (.validating, .validate): return validated(status)
            case (.askingSize, .reportReceivedImageSize):
                return remote(status, .reportReceivedImageSize, "")
            default:
                return violation("unexpected \(notification) \(whereWeAre)")
            }
        }
    }

    // MARK: - Firmware data

    mutating func beginData() -> [LegacyDFUAction] {
        var actions: [LegacyDFUAction] = []
        let prn = configuration.pacing.receiptInterval
        // PRN request before Receive Firmware Image (iOS and SDK 11 order; the counter is set by the request).
        if prn > 0 { actions.append(.writeControlPoint(.packetReceiptRequest(prn))) }
        actions.append(.writeControlPoint(.receiveFirmwareImage))
        return actions + sendWindow()
    }

    /// The next window of packets (or the rest of the image when streaming).
    mutating func sendWindow() -> [LegacyDFUAction] {
        let size = configuration.packetSize
        let left = (part.image.count - sentOffset + size - 1) / size
        window = configuration.pacing.nextWindow()
        let count = min(window ?? left, left)
        let end = min(part.image.count, sentOffset + count * size)
        step = .sendingData
        let packets = Self.packets(in: sentOffset..<end, size: size)
        sentOffset = end
        return [.sendPackets(LegacyPacketBurst(source: .firmware, packets: packets))]
    }

    mutating func windowWritten() -> [LegacyDFUAction] {
        if sentOffset == part.image.count {
            // No receipt for the last packet: the device answers 10 03 01 once it is in flash (dfu_cb_handler).
            step = .waitingLastPacket
            return [armTimer(configuration.responseTimeout)]
        }
        step = .waitingReceipt(late: false)
        let timerAction = armTimer(receiptTimeout)
        if let early = earlyReceipt, early == sentOffset {
            earlyReceipt = nil
            return windowConfirmed(.clean)
        }
        return [timerAction]
    }

    /// `11 <bytes>`: the device accepted that many bytes (in this bootloader session).
    mutating func receipt(_ bytes: Int) -> [LegacyDFUAction] {
        switch step {
        case .sendingData, .waitingReceipt, .waitingLastPacket, .askingSize: break
        case .starting where !configuration.checkReceivedSize:
            // The DFU service inside InfiniTime keeps an interrupted transfer across a lost link and ignores Start
            // while busy: it took our sizes for image data and counted them. It resets itself after ≈ 9.8 s without
            // a DFU access; the Start timeout outlasts that, and the attempt after it starts on an idle service.
            return []
        default: return violation("unexpected packet receipt (\(bytes) bytes) \(whereWeAre)")
        }
        guard bytes <= sentOffset else {
            return violation("the device reports \(bytes) bytes received but only \(sentOffset) were sent")
        }
        guard bytes >= confirmedOffset else {
            return violation("the device's byte count went back from \(confirmedOffset) to \(bytes)")
        }
        confirmedOffset = bytes
        if case .waitingReceipt(let late) = step, bytes == sentOffset { return windowConfirmed(late ? .lateReceipt : .clean) }
        if step == .sendingData, bytes == sentOffset { earlyReceipt = bytes }
        // A receipt inside the window: the count is consistent; the window's own receipt checks it again.
        return []
    }

    mutating func windowConfirmed(_ outcome: LegacyWindowOutcome) -> [LegacyDFUAction] {
        configuration.pacing.record(outcome)
        confirmedOffset = sentOffset
        return [.progress(progress)] + sendWindow()
    }

    /// `10 03 <status>`: the answer to the last packet (success), or a refused packet.
    mutating func dataAnswered(_ status: LegacyStatus) -> [LegacyDFUAction] {
        guard status == .success else {
            if status == .operationFailed {
                // No receive buffer or a full flash queue (app_data_process): the packet was dropped and every later
                // one lands at the wrong offset. Only a new attempt can repair it.
                return lost("the device refused a packet (operation failed: no receive buffer or flash queue full)")
            }
            return remote(status, .receiveFirmwareImage, "")
        }
        guard sentOffset == part.image.count else {
            return violation("the device reports the image complete after \(sentOffset) of \(part.image.count) bytes were sent")
        }
        // (The answer may overtake our own "packets written" event; that event is then ignored.)
        return lastPacketConfirmed()
    }

    mutating func lastPacketConfirmed() -> [LegacyDFUAction] {
        confirmedOffset = max(confirmedOffset, sentOffset)
        if configuration.checkReceivedSize {
            return [.progress(progress)] + request(.reportReceivedImageSize, .askingSize(final: true))
        }
        return [.progress(progress)] + request(.validate, .validating)
    }

    mutating func sizeReported(_ bytes: Int, final: Bool) -> [LegacyDFUAction] {
        guard bytes <= sentOffset else {
            return violation("the device reports \(bytes) bytes received but only \(sentOffset) were sent")
        }
        guard bytes == sentOffset else {
            if final {
                return violation("the device answered the last packet but reports \(bytes) of \(part.image.count) bytes received")
            }
            return lost("the device has \(bytes) of the \(sentOffset) bytes sent")
        }
        confirmedOffset = bytes
        if final { return request(.validate, .validating) }
        if sentOffset == part.image.count {
            // Every byte arrived but the answer to the last packet did not: Validate decides.
            return request(.validate, .validating)
        }
        return windowConfirmed(.lateReceipt)
    }

    /// How long to wait for a window's receipt before asking (or, without `07`, before waiting on as a late one).
    var receiptTimeout: Duration {
        min(configuration.pacing.receiptTimeout ?? configuration.responseTimeout, configuration.responseTimeout)
    }

    mutating func timedOut() -> [LegacyDFUAction] {
        switch step {
        case .waitingReceipt(late: false) where !configuration.checkReceivedSize && receiptTimeout < configuration.responseTimeout:
            // InfiniTime has no Report Received Image Size (its ControlPointHandler ignores 07 without an answer):
            // asking would only turn a receipt that is late (a backlog of packets still in the link) into a timeout.
            // Wait for the receipt itself until the response timeout; a late one confirms the window as lateReceipt.
            step = .waitingReceipt(late: true)
            return [armTimer(configuration.responseTimeout - receiptTimeout)]
        case .waitingReceipt, .waitingLastPacket:
            guard configuration.checkReceivedSize else {
                return fail(LegacyDFUError(.timeout, "no answer within \(configuration.responseTimeout) \(whereWeAre)"))
            }
            // Ask where the device is (07) instead of waiting for a receipt or an answer that will not come.
            return request(.reportReceivedImageSize, .askingSize(final: false))
        case .starting:
            return fail(
                LegacyDFUError(
                    .timeout, "no answer to Start DFU within \(configuration.eraseTimeout) (the device erases first)",
                    request: .startDFU))
        case .activating:
            return fail(
                LegacyDFUError(
                    .protocolViolation,
                    "the device acknowledged Activate and Reset for \(part.name) but did not reset within \(configuration.responseTimeout): the image is not installed",
                    request: .activateAndReset))
        default:
            return fail(LegacyDFUError(.timeout, "no answer within \(configuration.responseTimeout) \(whereWeAre)"))
        }
    }

    /// Packets were lost: slow down for the next attempt and reset the device.
    mutating func lost(_ what: String) -> [LegacyDFUAction] {
        configuration.pacing.attemptLost(window: window)
        let window = window.map { "windows of \($0) packets" } ?? "streaming"
        return reset("\(what) at \(confirmedOffset) of \(part.image.count) bytes (\(window)); the image starts again from zero", code: .bytesLost)
    }

    // MARK: - Validate and activate

    mutating func validated(_ status: LegacyStatus) -> [LegacyDFUAction] {
        switch status {
        case .success:
            // The device authorizes the write (Write Response) before it disconnects and installs (on_ble_evt); the
            // reset that installs the image drops the link: that, not the Write Response, says it happened (InfiniTime
            // ignores Activate out of order without an answer).
            return request(.activateAndReset, .activating)
        case .crcError:
            configuration.pacing.attemptLost(window: window)
            var reason = "Validate (0x04): CRC error (0x05): the image on the device does not match the init packet"
            if let layout = part.initLayout, [.v06, .v07, .v08].contains(layout) {
                reason += " (a \(layout.rawValue) init packet: the SDK 11 and Adafruit bootloaders check a CRC-16 only, so build the package with --dfu-ver 0.5)"
            }
            return reset(reason, status: status)
        default: return remote(status, .validate, "")
        }
    }
}
