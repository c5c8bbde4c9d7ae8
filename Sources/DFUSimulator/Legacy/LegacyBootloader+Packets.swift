import BLECore
import LegacyDFU

extension LegacyBootloader {
    /// SDK 6.0 (the SDK ≤ 6.1 protocol without 6.1's typed Start) takes the application size alone.
    var takesSizeOnlyStart: Bool { profile.kind == .sdk6 && !profile.sdkVersion.hasPrefix("6.1") }

    // MARK: Packet characteristic (dfu_transport_ble.c on_dfu_pkt_write)

    mutating func packet(_ bytes: [UInt8], now: Duration) -> [LegacyBootloaderAction] {
        counters.packetsReceived += 1
        // The SoftDevice refuses a write longer than the characteristic's max_len (MAX_DFU_PKT_LEN 20): a Write
        // Command is dropped without a trace (Android-DFU-Library #526).
        if bytes.count > profile.packetMaxLength {
            counters.packetsDropped += 1
            return []
        }
        if faults.shouldDrop() {
            counters.packetsDropped += 1
            faults.record("drop", "drop-rate", bytes: counters.bytesReceived, at: now)
            counters.faultsFired += 1
            return [.fault(faults.log[faults.log.count - 1])]
        }
        switch packetType {
        case .start: return startData(bytes, now: now)
        case .initPacket: return initData(bytes, now: now)
        case .firmwareData: return applicationData(bytes, now: now)
        case .invalid: return []  // "It is not possible to find out what packet it is. Ignore."
        }
    }

    /// start_data_process: exactly 12 bytes (SDK 6.0: 4), then dfu_start_pkt_handle.
    mutating func startData(_ bytes: [UInt8], now: Duration) -> [LegacyBootloaderAction] {
        var r = ByteReader(bytes)
        let sizes: LegacyStartSizes
        if takesSizeOnlyStart {
            guard bytes.count == 4, let application = try? r.readUInt32("size") else {
                return respond(.startDFU, .notSupported)
            }
            sizes = LegacyStartSizes(application: application)
        } else {
            guard let decoded = try? LegacyStartSizes(decoding: bytes) else { return respond(.startDFU, .notSupported) }
            sizes = decoded
        }
        guard let status = startPacket(sizes, now: now) else { return [] }  // 10 01 01 once the erase is done
        return respond(.startDFU, status)
    }

    /// dfu_start_pkt_handle, in the SDK's order: the start packet is stored before any check, the state is checked
    /// last (legacy-dfu.md §4). Nil: the erase is queued and the answer follows its completion.
    mutating func startPacket(_ sizes: LegacyStartSizes, now: Duration) -> LegacyStatus? {
        startSizes = sizes
        let mode = LegacyImageType(rawValue: updateMode)
        if mode.contains(.application), mode.contains(.softdevice) || mode.contains(.bootloader) { return .notSupported }
        guard sizes.softdevice % 4 == 0, sizes.bootloader % 4 == 0, sizes.application % 4 == 0 else { return .notSupported }
        imageSize = UInt32(truncatingIfNeeded: sizes.total)
        if Int(sizes.bootloader) > profile.layout.bootloaderMaxSize { return .dataSizeExceedsLimit }
        let full = profile.layout.fullSize(appStart: applicationStart)
        let banked = profile.layout.bankedSize(appStart: applicationStart)
        let intoBank1 = profile.dualBank && !mode.contains(.softdevice)
        // Dual bank: SoftDevice updates up to FULL (into bank 0), the rest up to BANKED (into bank 1).
        if sizes.total > UInt64(intoBank1 ? banked : full) { return .dataSizeExceedsLimit }
        guard state == .idle else { return .invalidState }
        restartTimer(now)
        state = .preparing
        let page = max(profile.layout.pageSize, 1)
        // dfu_prepare_func_swap_erase clears all of bank 1; dfu_prepare_func_app_erase clears bank 0 for the image.
        let eraseBytes = intoBank1 ? banked : Int(imageSize)
        // pstorage_clear fails when its queue is full (NRF_ERROR_NO_MEM): dfu_start_pkt_handle returns the error,
        // which the transport answers as Operation Failed.
        guard let operation = flash.erase(offset: 0, pages: (eraseBytes + page - 1) / page, now: now) else {
            state = .idle
            return .operationFailed
        }
        eraseDoneAt = operation.completesAt
        erasingBank0 = !intoBank1
        return nil
    }

    /// The pstorage clear callback: the bank is ready, 10 01 01. Clearing bank 0 saves the settings with the
    /// application invalid (DFU_BANK_0_ERASED): a single-bank device has lost its application from here on.
    mutating func eraseCompleted() -> [LegacyBootloaderAction] {
        state = .ready
        if erasingBank0 {
            bank0 = .invalid
            installed.application = nil
        }
        return respond(.startDFU, .success)
    }

    /// init_data_process: every write padded with zeros to a multiple of 4, then dfu_init_pkt_handle; answered
    /// only on an error (SDK ≤ 6.1: every write is answered).
    mutating func initData(_ bytes: [UInt8], now: Duration) -> [LegacyBootloaderAction] {
        let padded = bytes + [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4)
        let status = initPacketHandle(padded, now: now)
        if profile.kind == .sdk6 || status != .success { return respond(.initialize, status) }
        return []
    }

    /// dfu_init_pkt_handle.
    mutating func initPacketHandle(_ padded: [UInt8], now: Duration) -> LegacyStatus {
        switch state {
        case .ready, .receivingInit:
            state = .receivingInit
            if dataReceived > 0 { return .invalidState }  // IMAGE_WRITE_IN_PROGRESS
            restartTimer(now)
            // m_init_packet[]: overflow is NRF_ERROR_INVALID_LENGTH, translated to "operation failed".
            guard initPacket.count + padded.count <= profile.initPacketCapacity else { return .operationFailed }
            initPacket += padded
            return .success
        default: return .invalidState
        }
    }

    /// dfu_init_pkt_complete (`02 01`).
    mutating func initComplete() -> LegacyStatus {
        if dataReceived > 0 { return .invalidState }
        guard state == .receivingInit else { return .invalidState }
        let status = prevalidate()
        if status == .success { state = .receivingData } else { initPacket = [] }
        return status
    }

    // MARK: Firmware data (app_data_process, dfu_data_pkt_handle)

    mutating func applicationData(_ bytes: [UInt8], now: Duration) -> [LegacyBootloaderAction] {
        guard bytes.count % 4 == 0 else { return respond(.receiveFirmwareImage, .notSupported) }
        // hci_mem_pool_rx_produce: no free RX buffer (each is held until its flash write completes) → NO_MEM.
        guard bytes.count <= profile.receiveBufferSize else { return respond(.receiveFirmwareImage, .dataSizeExceedsLimit) }
        guard flash.queuedWrites < max(profile.receiveBuffers, 1) else {
            counters.packetsRefused += 1
            return respond(.receiveFirmwareImage, .operationFailed)
        }
        var actions: [LegacyBootloaderAction] = []
        let outcome = dataPacketHandle(bytes, now: now, into: &actions)
        switch outcome {
        case .failure(let status):
            if status == .operationFailed { counters.packetsRefused += 1 }
            return actions + respond(.receiveFirmwareImage, status)
        case .accepted(let final, let writtenAt):
            bytesAccepted &+= UInt32(bytes.count)
            counters.bytesReceived += UInt64(bytes.count)
            if final {
                if profile.kind == .sdk6 {
                    actions += respond(.receiveFirmwareImage, .success)  // SDK 6.0: answered at once
                } else {
                    finalAnswerAt = writtenAt  // answered once the write is in flash (dfu_cb_handler)
                }
            } else if prnEnabled {
                prnCountdown = prnCountdown &- 1
                if prnCountdown == 0 {
                    prnCountdown = prnTarget
                    counters.prnsSent += 1
                    if connected { actions.append(.notify(LegacyNotification.packetReceipt(bytesReceived: bytesAccepted).encoded)) }
                }
            }
        }
        if let trigger = faults.atStep(["packet"], after: false) ?? faults.afterBytes(counters.bytesReceived) {
            actions += fire(trigger, now: now)
        }
        return actions
    }

    enum DataOutcome {
        case accepted(final: Bool, writtenAt: Duration)
        case failure(LegacyStatus)
    }

    /// dfu_data_pkt_handle; Adafruit busy-waits for a flash slot instead of refusing (`is_ota()` loop).
    mutating func dataPacketHandle(_ bytes: [UInt8], now: Duration, into actions: inout [LegacyBootloaderAction])
        -> DataOutcome
    {
        switch state {
        case .receivingData: break
        case .ready, .receivingInit:
            // SDK 11: data before the init packet is complete → invalid state. SDK <= 6.1: the init packet is optional.
            guard profile.kind == .sdk6 else { return .failure(.invalidState) }
            state = .receivingData
        default: return .failure(.invalidState)
        }
        guard UInt64(dataReceived) + UInt64(bytes.count) <= UInt64(imageSize) else {
            dataReceived = 0xFFFF_FFFF  // every later write is refused too
            return .failure(.dataSizeExceedsLimit)
        }
        restartTimer(now)
        var at = now
        if profile.kind == .adafruit {
            while flash.pending.count >= max(profile.flash.queueDepth, 1), let next = flash.pending.first?.completesAt {
                at = max(at, next)
                flash.retire(now: at)
            }
            if at > now { actions.append(.wait(at - now)) }
        }
        var stored = bytes
        if let index = faults.corruption(offset: Int(dataReceived), count: bytes.count) {
            stored[index] ^= 0x01
            faults.record("corrupt-flash", "corrupt-flash-at", bytes: counters.bytesReceived, at: now)
            counters.faultsFired += 1
            actions.append(.fault(faults.log[faults.log.count - 1]))
        }
        guard let operation = flash.write(offset: Int(dataReceived), bytes: stored, now: at) else {
            return .failure(.operationFailed)  // pstorage_store NO_MEM (SDK 11)
        }
        dataReceived += UInt32(bytes.count)
        return .accepted(final: dataReceived == imageSize, writtenAt: operation.completesAt)
    }
}
