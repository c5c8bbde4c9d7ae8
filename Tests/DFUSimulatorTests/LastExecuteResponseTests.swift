import ATT
import BLECore
import DFUProtocol
import DFUSimulator
import GATT
import Synchronization
import TestDoubles
import Testing

/// The SDK answers a Control Point write in its authorize handler and schedules the request
/// (`nrf_dfu_ble.c on_rw_authorize_req`): the Write Response comes first, the notification after it. After the last
/// Execute the bootloader writes its settings, then disconnects and resets (`on_dfu_complete`): the PDUs end with
/// the Write Response and the Execute notification, in that order, and nothing after them. (The same over a real
/// socket pair, many times: CLITests `SimulatorLastExecuteTests`.)
@Suite(.timeLimit(.minutes(5))) struct LastExecuteResponseTests {
    @Test func theResetComesAfterTheWriteResponse() async throws {
        let clock = ManualClock()
        var profile = Fixture.profile()
        profile.installed.application = nil  // starts in the bootloader
        let device = VirtualDevice(profile: profile, clock: clock)
        let image = Fixture.firmware(1_000)
        let dat = Fixture.initPacket(Fixture.command(for: image))
        let trace = PDUTrace()
        let (central, peripheral) = InMemoryBearer.makePair(capacity: 64, observer: trace)
        let serving = Task { await device.serve(peripheral) }
        let att = ATTClient(bearer: central, clock: clock)
        let client = GATTClient(att: att)
        let service = try #require(try await client.discoverAll().first { $0.uuid == SecureDFUUUID.service })
        let cp = try #require(service.characteristic(SecureDFUUUID.controlPoint))
        let packet = try #require(service.characteristic(SecureDFUUUID.packet))
        var notifications = client.notifications.makeAsyncIterator()
        try await client.setNotifications(true, of: cp)

        func ask(_ bytes: [UInt8]) async throws -> [UInt8]? {
            try await client.write(handle: cp.valueHandle, value: bytes)
            return await notifications.next()?.value
        }
        func send(_ bytes: [UInt8]) async throws {
            for start in stride(from: 0, to: bytes.count, by: 20) {  // ATT_MTU 23: 20 octets per Write Command
                try await client.writeWithoutResponse(
                    handle: packet.valueHandle, value: Array(bytes[start..<min(start + 20, bytes.count)]))
            }
        }
        _ = try await ask([0x06, 0x01])
        _ = try await ask(ControlPointRequest.create(type: .command, size: UInt32(dat.count)).encoded)
        try await send(dat)
        #expect(try await ask([0x03]) == checksumBytes(dat.count, CRC32.checksum(dat)))
        #expect(try await ask([0x04]) == [0x60, 0x04, 0x01])
        _ = try await ask([0x06, 0x02])
        _ = try await ask(ControlPointRequest.create(type: .data, size: UInt32(image.count)).encoded)
        try await send(image)
        #expect(try await ask([0x03]) == checksumBytes(image.count, CRC32.checksum(image)))
        // The last Execute: throws if the link dropped before the Write Response.
        #expect(try await ask([0x04]) == [0x60, 0x04, 0x01])
        await serving.value
        #expect(await att.disconnected().code == .disconnected)
        #expect(await device.mode == .application)
        let handle = hex(UInt8(cp.valueHandle & 0xFF)) + " " + hex(UInt8(cp.valueHandle >> 8))
        #expect(
            trace.lines.suffix(3) == [
                "> 12 \(handle) 04",  // Write Request: Execute
                "< 13",  // Write Response
                "< 1B \(handle) 60 04 01",  // Handle Value Notification: Execute, success; then the link ends
            ])
        // Every Control Point write: Write Response first, then the notification (nrf_dfu_ble.c answers the write
        // in on_rw_authorize_req and schedules the request).
        let lines = trace.lines
        let writes = lines.indices.filter { lines[$0].hasPrefix("> 12 \(handle) ") }
        #expect(writes.count == 8)
        for index in writes {
            #expect(lines[index + 1] == "< 13")
            #expect(lines[index + 2].hasPrefix("< 1B \(handle) 60 "))
        }
    }

    /// Real flash timing made 20 times slower (so that the window holds under load: the settings page and its backup,
    /// 2 × (85 ms + 228 words × 41 µs) × 20 ≈ 3.8 s), a link without air time: after the last Execute's answer the
    /// device still serves ATT while it writes its settings, and drops the link after.
    @Test func theLinkStaysUpWhileTheSettingsAreWritten() async throws {
        var profile = Fixture.profile(sdk: "17.1.0")
        profile.installed.application = nil
        profile.speedup = 1
        profile.link.writeResponseLatencyEvents = 0
        profile.link.connectionIntervalMs = 7.5
        profile.link.llDataLength = 251
        profile.link.phy = "2M"
        let device = VirtualDevice(
            profile: profile, faults: try FaultPlan(parsing: "slow-flash=20"), clock: ContinuousClock())
        let image = Fixture.firmware(1_000)
        let dat = Fixture.initPacket(Fixture.command(for: image))
        let (central, peripheral) = InMemoryBearer.makePair(capacity: 64)
        let serving = Task { await device.serve(peripheral) }
        let att = ATTClient(bearer: central, transactionTimeout: .seconds(30))
        let client = GATTClient(att: att)
        _ = try await att.exchangeMTU(247)
        let services = try await client.discoverAll()
        let service = try #require(services.first { $0.uuid == SecureDFUUUID.service })
        let name = try #require(
            services.first { $0.uuid == SimulatorUUID.genericAccess }?.characteristic(SimulatorUUID.deviceName))
        let cp = try #require(service.characteristic(SecureDFUUUID.controlPoint))
        let packet = try #require(service.characteristic(SecureDFUUUID.packet))
        var notifications = client.notifications.makeAsyncIterator()
        try await client.setNotifications(true, of: cp)
        func ask(_ bytes: [UInt8]) async throws -> [UInt8]? {
            try await client.write(handle: cp.valueHandle, value: bytes)
            return await notifications.next()?.value
        }
        _ = try await ask(ControlPointRequest.create(type: .command, size: UInt32(dat.count)).encoded)
        try await client.writeWithoutResponse(handle: packet.valueHandle, value: dat)
        #expect(try await ask([0x04]) == [0x60, 0x04, 0x01])
        _ = try await ask(ControlPointRequest.create(type: .data, size: UInt32(image.count)).encoded)
        for start in stride(from: 0, to: image.count, by: 244) {
            try await client.writeWithoutResponse(
                handle: packet.valueHandle, value: Array(image[start..<min(start + 244, image.count)]))
        }
        #expect(try await ask([0x04]) == [0x60, 0x04, 0x01])
        // The device is writing its settings: the link is up, reads are answered.
        #expect(try await client.read(handle: name.valueHandle) == Array(bootloaderDefaultName.utf8))
        #expect(await device.mode == .bootloader)
        // Then it drops the link and comes back in the new application.
        #expect(await att.disconnected().code == .disconnected)
        await serving.value
        #expect(await device.mode == .application)
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(image))
    }
}

/// Every PDU across an in-memory pair: "> hex" central to device, "< hex" device to central.
final class PDUTrace: PDUObserver {
    private let entries = Mutex<[String]>([])
    func observe(pdu: [UInt8], sent: Bool) {
        let line = (sent ? "> " : "< ") + pdu.map(hex).joined(separator: " ")
        entries.withLock { $0.append(line) }
    }
    var lines: [String] { entries.withLock { $0 } }
}

private func hex(_ byte: UInt8) -> String {
    let text = String(byte, radix: 16, uppercase: true)
    return text.count == 1 ? "0" + text : text
}
