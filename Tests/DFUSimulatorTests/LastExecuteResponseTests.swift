import ATT
import BLECore
import DFUProtocol
import DFUSimulator
import GATT
import Synchronization
import Testing

/// After the last Execute the bootloader resets; the simulated device first lets the GATT server answer the write
/// (`GATTServer.closeAfterResponse()`), so the PDUs end with the Execute notification and the Write Response, in
/// that order, and nothing after them. (The same over a real socket pair, many times: CLITests
/// `SimulatorLastExecuteTests`.)
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
                "< 1B \(handle) 60 04 01",  // Handle Value Notification: Execute, success
                "< 13",  // Write Response; then the link ends, nothing after it
            ])
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
