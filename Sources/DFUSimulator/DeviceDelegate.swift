import ATT
import BLECore
import DFUProtocol
import GATT
import Synchronization

/// The GATT application of one connection: paces PDUs with the link model and routes writes to the device's
/// bootloader state machine or buttonless logic, then carries out the actions.
final class DeviceDelegate: GATTServerDelegate {
    let device: VirtualDevice
    let mode: DeviceMode
    let controlPoint: UInt16?
    let packet: UInt16?
    let buttonless: UInt16?
    let counter: UInt16?
    let firmwareRevision: UInt16?
    private let flags = Mutex<Bool>(false)

    init(device: VirtualDevice, database: GATTDatabase, mode: DeviceMode) {
        self.device = device
        self.mode = mode
        let uuids = device.profile.dfuUUIDs
        controlPoint = database.handle(of: uuids.controlPoint, in: uuids.service)
        packet = database.handle(of: uuids.packet, in: uuids.service)
        let buttonlessUUID = DeviceDatabases.buttonlessUUID(device.profile.buttonless, uuids: uuids)
        buttonless = buttonlessUUID.flatMap { database.handle(of: $0, in: uuids.service) }
        counter = database.handle(of: SimulatorUUID.demoCounter, in: SimulatorUUID.demoService)
        firmwareRevision = database.handle(of: SimulatorUUID.firmwareRevision, in: SimulatorUUID.deviceInformation)
    }

    /// The connection ended in a reboot (the device already reloaded its settings).
    var rebooted: Bool { flags.withLock { $0 } }

    /// The Control Point request accepted by the last Write Response, waiting for the scheduler.
    private let scheduled = Mutex<[UInt8]?>(nil)
    /// The reset that follows the settings write after the last Execute (`on_dfu_complete`), while it is pending.
    private let resetTask = Mutex<Task<Void, Never>?>(nil)

    /// Waits for a pending reset (the device does not come back before it).
    func pendingReset() async {
        await resetTask.withLock { $0 }?.value
    }

    func afterResponding(to pdu: ATTPDU, server: GATTServer) async {
        guard let request = scheduled.withLock({ state -> [UInt8]? in
            defer { state = nil }
            return state
        }) else { return }
        _ = await perform(await device.handleControlPoint(request), server: server)
        await device.publish()
    }

    func beforeHandling(_ pdu: ATTPDU, server: GATTServer) async {
        await device.pace(pdu)
    }

    func read(_ attribute: GATTAttribute, offset: Int, server: GATTServer) async -> GATTReadResult {
        if attribute.handle == counter, offset == 0 {
            let value = await device.nextCounter()
            return .value(withUnsafeBytes(of: value.littleEndian) { Array($0) })
        }
        if attribute.handle == firmwareRevision {
            return .value(Array(await device.firmwareRevision.utf8))
        }
        return .storedValue
    }

    func write(_ attribute: GATTAttribute, value: [UInt8], withResponse: Bool, server: GATTServer) async
        -> ATTErrorCode?
    {
        let handle = attribute.handle
        if let controlPoint, handle == controlPoint {
            // nrf_dfu_ble.c on_rw_authorize_req: with notifications off the write is refused in the authorize reply;
            // otherwise the reply accepts it (the Write Response) and the request is scheduled
            // (nrf_dfu_req_handler_on_req): it is handled in `afterResponding`, once the Write Response went out.
            let enabled = await server.isNotifying(valueHandle: controlPoint)
            if let refused = await device.authorizeControlPoint(value, cccdEnabled: enabled) {
                return await perform(refused, server: server)  // no Write Response: an ATT error or a lost link
            }
            scheduled.withLock { $0 = value }
            return nil
        }
        if let packet, handle == packet {
            return await perform(
                await device.bootloaderEvent(.packetWrite(value, withResponse: withResponse)), server: server)
        }
        if let buttonless, handle == buttonless {
            let enabled = await server.isIndicating(valueHandle: buttonless)
            switch await device.buttonlessWrite(value, indicationsEnabled: enabled) {
            case .attError(let code): return ATTErrorCode(code)
            case .indicate(let bytes, let jump):
                // The indication waits for its confirmation, which the server reads only after this write returns:
                // send it from a task. ble_dfu.c on_hvc: the reset happens once the confirmation arrived.
                let device = self.device
                Task {
                    do {
                        try await server.indicate(handle: buttonless, value: bytes)
                    } catch {
                        return  // No confirmation (link lost or ATT timeout): the app does not reset.
                    }
                    guard jump else { return }
                    await device.enterBootloader()
                    await server.close()
                    await device.publish()
                }
                return nil
            }
        }
        return nil
    }

    func clientConfigurationChanged(valueHandle: UInt16, configuration: GATTClientConfiguration, server: GATTServer)
        async
    {
        if valueHandle == counter, configuration.contains(.notification) {
            let value = await device.nextCounter()
            // A failed notify means the link is gone; nothing to undo.
            try? await server.notify(handle: valueHandle, value: withUnsafeBytes(of: value.littleEndian) { Array($0) })
        }
    }

    /// Carries out bootloader actions in order; returns the ATT error to answer, if any. A disconnect or reboot
    /// that follows a notification closes the link once the server has answered the write (the SoftDevice sends
    /// the Write Response before the bootloader handles the request, so the central always gets it); one that comes
    /// first closes at once (the request is lost with the link).
    func perform(_ actions: [BootloaderAction], server: GATTServer) async -> ATTErrorCode? {
        var refusal: ATTErrorCode?
        var notified = false
        for action in actions {
            switch action {
            case .notify(let bytes):
                notified = true
                // A failed notify means the link is gone; the server has recorded why and `serve` sees it end.
                if let controlPoint { try? await server.notify(handle: controlPoint, value: bytes) }
            case .attError(let code): refusal = code
            case .flash, .fault: break
            case .wait(let duration): await device.sleep(duration)
            case .disconnect:
                await close(server, deferred: notified)
            case .reboot(let into):
                flags.withLock { $0 = true }
                await device.applyReboot(into)
                await close(server, deferred: notified)
            case .resetAfterFlash(let flashTime, let into):
                scheduleReset(after: flashTime, into: into, server: server)
            }
        }
        return refusal
    }

    /// The end of a completed update, SDK 15-17: the settings page (and from 15.3 its backup) is written with the link
    /// up (`nrf_dfu_settings_write_and_backup(on_dfu_complete)`); `on_dfu_complete` then closes the transports, which
    /// disconnects the central and waits 200 ms (`nrf_dfu.c dfu_observer`, `ble_dfu_transport_close`), and the device
    /// resets (`nrf_bootloader.c bootloader_reset`). The server keeps answering ATT meanwhile (the SoftDevice does);
    /// Control Point requests get their Write Response and no answer. A link the central drops in that time does not
    /// stop the reset.
    func scheduleReset(after flashTime: Duration, into mode: DeviceMode, server: GATTServer) {
        let device = self.device
        let task = Task {
            await device.sleep(flashTime)
            await server.close()
            await device.sleep(device.profile.scaled(micros: Self.transportCloseDelayMicros))
            self.flags.withLock { $0 = true }
            await device.applyReboot(mode)
            await device.publish()
        }
        resetTask.withLock { $0 = task }
    }

    /// `ble_dfu_transport_close`: "Wait a bit for the disconnect event to be sent on air", `nrf_delay_ms(200)`.
    static let transportCloseDelayMicros: Double = 200_000

    /// `deferred`: after the response to the PDU being handled (`closeAfterResponse` returns at once; awaiting the
    /// close here would wait for the server, which waits for this delegate); else now.
    func close(_ server: GATTServer, deferred: Bool) async {
        if deferred {
            await server.closeAfterResponse()
        } else {
            await server.close()
        }
    }
}
