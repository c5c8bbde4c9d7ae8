import BLECore
import DFUPackage
import DFUProtocol

extension BootloaderStateMachine {
    // MARK: Create

    mutating func create(type: DFUObjectType, size: UInt32, now: Duration, into actions: inout [BootloaderAction]) {
        switch type {
        case .command:
            currentType = type
            // nrf_dfu_validation_init_cmd_create.
            if size == 0 { return actions.append(.notify(response(.create, .failure(.invalidParameter)))) }
            if size > UInt32(profile.commandObjectMaxSize) {
                return actions.append(.notify(response(.create, .failure(.insufficientResources))))
            }
            initValid = false
            settings = BootloaderSettings()  // dfu_progress_reset: all progress and the init command are gone.
            settings.commandSize = size
            prnCountdown = prnTarget
            actions.append(.notify(response(.create, .success)))
        case .data:
            currentType = type
            // on_data_obj_create_request, in the SDK's order.
            guard initValid, let firmwareSize = announcedFirmwareSize(settings) else {
                return actions.append(.notify(response(.create, .failure(.operationNotPermitted))))
            }
            let page = UInt32(profile.flash.pageSize)
            let isLast = settings.offsetLast &+ size == firmwareSize
            if size == 0 { return actions.append(.notify(response(.create, .failure(.invalidParameter)))) }
            if size % page != 0 && !isLast {
                return actions.append(.notify(response(.create, .failure(.invalidParameter))))
            }
            if size > UInt32(profile.dataObjectMaxSize) {
                return actions.append(.notify(response(.create, .failure(.insufficientResources))))
            }
            if UInt64(settings.offsetLast) + UInt64(size) > UInt64(firmwareSize) {
                return actions.append(.notify(response(.create, .failure(.operationNotPermitted))))
            }
            settings.dataObjectSize = size
            settings.firmwareCRC = settings.crcLast
            settings.firmwareOffset = settings.offsetLast
            prnCountdown = prnTarget
            let pages = Int((size + page - 1) / page)
            // nrf_dfu_flash_erase fails when the fstorage queue is full (the writes of the last object are still
            // queued): Invalid Object, with the object's settings already set above, as in the SDK.
            guard let op = flash.erase(offset: Int(settings.offsetLast), pages: pages, now: now) else {
                counters.createsRefused += 1
                return actions.append(.notify(response(.create, .failure(.invalidObject))))
            }
            actions.append(.flash(op))
            actions.append(.notify(response(.create, .success)))
        default:
            currentType = nil
            actions.append(.notify(response(.create, .failure(.unsupportedType))))
        }
    }

    // MARK: Execute

    mutating func execute(now: Duration, into actions: inout [BootloaderAction]) {
        switch currentType {
        case .command?:
            // nrf_dfu_validation_init_cmd_execute.
            if settings.commandOffset != settings.commandSize || settings.commandSize == 0 {
                return actions.append(.notify(response(.execute, .failure(.operationNotPermitted))))
            }
            if initValid {
                // Already validated since the last reset: success again (the SDK recomputes the size only).
                return actions.append(.notify(response(.execute, .success)))
            }
            let status = validateInit(settings.initCommand)
            if status == .success {
                initValid = true
                persist()  // The init command is always written to flash.
            } else {
                settings = BootloaderSettings()
            }
            actions.append(.notify(response(.execute, status)))
        case .data?:
            executeData(now: now, into: &actions)
        default:
            actions.append(.notify(response(.execute, .failure(.invalidObject))))
        }
    }

    mutating func executeData(now: Duration, into actions: inout [BootloaderAction]) {
        // on_data_obj_execute_request (identical in SDK 15.0-17.1): the bytes written since the last executed object
        // must equal the size of the last Create. An object created and not (fully) written → 0x08. An object already
        // executed passes (data_object_size was zeroed and nothing was written since: 0 == 0) and answers success
        // again, in every version.
        guard initValid, let firmwareSize = announcedFirmwareSize(settings),
            settings.firmwareOffset &- settings.offsetLast == settings.dataObjectSize
        else {
            return actions.append(.notify(response(.execute, .failure(.operationNotPermitted))))
        }
        settings.offsetLast = settings.firmwareOffset
        settings.crcLast = settings.firmwareCRC
        settings.dataObjectSize = 0
        // on_data_obj_execute_request_sched (SDK 15-17) answers every data Execute only once nrf_fstorage is idle
        // ("Wait for all buffers to be written in flash"): the response waits for the whole flash queue.
        if let idle = flash.idleAt, idle > now { actions.append(.wait(idle - now)) }
        guard settings.firmwareOffset == firmwareSize else {
            if profile.saveProgress { persist() }
            return actions.append(.notify(response(.execute, .success)))
        }
        // The last object: post-validate what the flash holds (nrf_dfu_validation_activation_prepare → postvalidate).
        // Either way the progress is reset, the response goes out, the settings are written (15.3+: with their
        // backup) and on_dfu_complete resets the device: into the new image, or after a failure into the old
        // application, which the dual bank left intact (bank 1 invalidated).
        flash.drain()
        let image = flash.contents(count: Int(firmwareSize))
        var status = postValidate(image)
        var softDeviceActivated = false
        if status == .success, let command = decodedInit(settings) {
            install(image: image, command: command)
            counters.updatesCompleted += 1
            softDeviceActivated = [.softdevice, .softdeviceBootloader].contains(command.type ?? .application)
        } else if status == .success {
            status = .failure(.invalidObject)
        }
        settings = BootloaderSettings()
        initValid = false
        persist()
        resetPending = true
        actions.append(.notify(response(.execute, status)))
        // nrf_bootloader_fw_activation.c: a SoftDevice just activated with a valid application →
        // ACTIVATION_SUCCESS_EXPECT_ADDITIONAL_UPDATE, the bootloader stays in DFU mode for the application.
        let mode: DeviceMode = softDeviceActivated && installed.application != nil ? .bootloader : bootMode
        actions.append(.resetAfterFlash(settingsWriteTime, into: mode))
    }

    /// `sizeof(nrf_dfu_settings_t)`, SDK 15.3-17.1: about 0.9 KiB, 512 bytes of it the init command buffer.
    static let settingsPageBytes = 912

    /// The settings write after the last Execute: erase the settings page and store the settings; from SDK 15.3 the
    /// same again for the backup page (`nrf_dfu_settings_write_and_backup`; 15.0 has no backup page).
    var settingsWriteTime: Duration {
        let words = Double((Self.settingsPageBytes + 3) / 4)
        let one = profile.flash.pageEraseMicros + words * profile.flash.wordWriteMicros
        return flash.duration(micros: one * Double(profile.sdk.hasSettingsBackup ? 2 : 1))
    }

    mutating func install(image: [UInt8], command: InitCommand) {
        let type = command.type ?? .application
        let version = command.fwVersion ?? 0
        let digest = ImageDigest.sha256Hex(image)
        let size = UInt32(image.count)
        let keepVersion = command.isDebug == true
        switch type {
        case .application, .externalApplication:
            let old = installed.application?.version ?? 0
            installed.application = InstalledImage(version: keepVersion ? old : version, size: size, sha256: digest)
        case .bootloader:
            installed.bootloader = InstalledImage(
                version: keepVersion ? installed.bootloader.version : version, size: size, sha256: digest)
        case .softdevice:
            installed.softdevice = InstalledImage(version: version, size: size, sha256: digest)
        default:
            let sdSize = Int(command.sdSize ?? 0)
            let sd = Array(image.prefix(sdSize))
            let bl = Array(image.dropFirst(sdSize))
            installed.softdevice = InstalledImage(
                version: version, size: UInt32(sd.count), sha256: ImageDigest.sha256Hex(sd))
            installed.bootloader = InstalledImage(
                version: keepVersion ? installed.bootloader.version : version, size: UInt32(bl.count),
                sha256: ImageDigest.sha256Hex(bl))
        }
    }

    // MARK: Packet

    mutating func packet(_ bytes: [UInt8], now: Duration) -> [BootloaderAction] {
        counters.packetsReceived += 1
        // nrf_dfu_ble.c on_write: no free receive buffer → the write is dropped before it is counted.
        if flash.queuedWrites >= max(profile.link.receiveBuffers, 1) {
            counters.packetsDropped += 1
            return []
        }
        if faults.shouldDrop() {
            counters.packetsDropped += 1
            faults.record("drop", "drop-rate", bytes: counters.bytesReceived, at: now)
            counters.faultsFired += 1
            return [.fault(faults.log[faults.log.count - 1])]
        }
        counters.bytesReceived += UInt64(bytes.count)
        var actions: [BootloaderAction] = []
        var reply = ControlPointResponse(request: .calculateChecksum, status: .success, payload: [])
        switch currentType {
        case .command?:
            // nrf_dfu_validation_init_cmd_append.
            if UInt64(settings.commandOffset) + UInt64(bytes.count) > UInt64(settings.commandSize) {
                reply.status = .failure(.invalidParameter)
            } else {
                settings.initCommand += bytes
                settings.commandOffset += UInt32(bytes.count)
                var crc = CRC32(continuing: settings.commandCRC)
                crc.update(bytes)
                settings.commandCRC = crc.value
                reply = ControlPointResponse.checksum(offset: settings.commandOffset, crc: settings.commandCRC)
            }
        case .data?:
            reply = dataWrite(bytes, now: now, into: &actions)
        default:
            reply.status = .failure(.invalidObject)
        }
        // ble_dfu_req_handler_callback: every handled write counts down; at zero the (CRC-shaped) response goes out.
        if prnTarget != 0 {
            prnCountdown = prnCountdown &- 1
            if prnCountdown == 0 {
                prnCountdown = prnTarget
                counters.prnsSent += 1
                actions.append(.notify(reply.status == .success ? reply.encoded : Array(reply.encoded.prefix(3))))
            }
        }
        if let trigger = faults.atStep(["packet"], after: false) ?? faults.afterBytes(counters.bytesReceived) {
            actions += fire(trigger, now: now)
        }
        return actions
    }

    /// on_data_obj_write_request. The returned response is what a PRN on this write carries.
    mutating func dataWrite(_ bytes: [UInt8], now: Duration, into actions: inout [BootloaderAction])
        -> ControlPointResponse
    {
        var reply = ControlPointResponse(request: .calculateChecksum, status: .success, payload: [])
        guard initValid else {
            reply.status = .failure(.operationNotPermitted)
            return reply
        }
        let objectEnd = UInt64(settings.offsetLast) + UInt64(settings.dataObjectSize)
        guard UInt64(settings.firmwareOffset) + UInt64(bytes.count) <= objectEnd else {
            reply.status = .failure(.invalidParameter)
            return reply
        }
        var stored = bytes
        if let index = faults.corruption(offset: Int(settings.firmwareOffset), count: bytes.count) {
            stored[index] ^= 0x01
            faults.record("corrupt-flash", "corrupt-flash-at", bytes: counters.bytesReceived, at: now)
            counters.faultsFired += 1
            actions.append(.fault(faults.log[faults.log.count - 1]))
        }
        guard let op = flash.write(offset: Int(settings.firmwareOffset), bytes: stored, now: now) else {
            // Flash queue full: dropped silently; the zero-initialised response still counts toward the PRN
            // (offset 0, CRC 0).
            counters.packetsDropped += 1
            return ControlPointResponse.checksum(offset: 0, crc: 0)
        }
        actions.append(.flash(op))
        // The CRC covers the received data (RAM), not what flash holds.
        var crc = CRC32(continuing: settings.firmwareCRC)
        crc.update(bytes)
        settings.firmwareCRC = crc.value
        settings.firmwareOffset += UInt32(bytes.count)
        return ControlPointResponse.checksum(offset: settings.firmwareOffset, crc: settings.firmwareCRC)
    }
}
