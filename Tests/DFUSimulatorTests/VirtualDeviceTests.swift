import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import GATT
import TestDoubles
import Testing

/// One client connection to a virtual device over an in-memory bearer pair.
struct Link {
    let client: GATTClient
    let serving: Task<Void, Never>
    var notifications: AsyncStream<ATTNotification>.Iterator
    let services: [GATTService]

    init(_ device: VirtualDevice, clock: ManualClock) async throws {
        let (central, peripheral) = InMemoryBearer.makePair(capacity: 64)
        serving = Task { await device.serve(peripheral) }
        client = GATTClient(att: ATTClient(bearer: central, clock: clock))
        notifications = client.notifications.makeAsyncIterator()
        _ = try await client.att.exchangeMTU(247)
        services = try await client.discoverAll()
    }

    func characteristic(_ uuid: BluetoothUUID, in service: BluetoothUUID) throws -> GATTCharacteristic {
        try #require(services.first { $0.uuid == service }?.characteristic(uuid))
    }

    mutating func next() async -> [UInt8]? { await notifications.next()?.value }
}

@Suite("Virtual device over GATT", .timeLimit(.minutes(5)))
struct VirtualDeviceTests {
    @Test("Buttonless jump: indication confirmed → bootloader at address + 1 (no carry) named DfuTarg")
    func buttonlessJump() async throws {
        let clock = ManualClock()
        let device = VirtualDevice(profile: Fixture.profile(), clock: clock)
        #expect(await device.currentAdvertisement.parsed.name == "Bracelet")
        var link = try await Link(device, clock: clock)
        let revision = try link.characteristic(SimulatorUUID.firmwareRevision, in: SimulatorUUID.deviceInformation)
        #expect(try await link.client.read(handle: revision.valueHandle) == Array("1".utf8))
        let buttonless = try link.characteristic(SecureDFUUUID.buttonlessWithoutBonds, in: SecureDFUUUID.service)
        // Without indications enabled: ATT error 0xFD.
        await #expect(throws: ATTClientError.self) {
            try await link.client.write(handle: buttonless.valueHandle, value: [0x01])
        }
        try await link.client.setIndications(true, of: buttonless)
        // 02 04 "Band": set the advertising name; then 01: enter the bootloader.
        try await link.client.write(handle: buttonless.valueHandle, value: [0x02, 0x04] + Array("Band".utf8))
        #expect(await link.next() == [0x20, 0x02, 0x01])
        try await link.client.write(handle: buttonless.valueHandle, value: [0x01])
        #expect(await link.next() == [0x20, 0x01, 0x01])
        await link.serving.value  // the device closes the link after the confirmation
        #expect(await device.mode == .bootloader)
        let advertisement = await device.currentAdvertisement
        #expect(advertisement.peer.address == BluetoothAddress("C0:11:22:33:44:00"))
        #expect(advertisement.parsed.name == "Band")
        #expect(advertisement.parsed.serviceUUIDs == [SecureDFUUUID.service])
    }

    @Test("The bonded buttonless variant keeps the address and does not take a name")
    func bondedKeepsAddress() async throws {
        let clock = ManualClock()
        let device = VirtualDevice(profile: Fixture.profile(buttonless: .bonded), clock: clock)
        var link = try await Link(device, clock: clock)
        let buttonless = try link.characteristic(SecureDFUUUID.buttonlessWithBonds, in: SecureDFUUUID.service)
        try await link.client.setIndications(true, of: buttonless)
        try await link.client.write(handle: buttonless.valueHandle, value: [0x02, 0x01, 0x41])
        #expect(await link.next() == [0x20, 0x02, 0x02])
        try await link.client.write(handle: buttonless.valueHandle, value: [0x01])
        #expect(await link.next() == [0x20, 0x01, 0x01])
        await link.serving.value
        #expect(await device.currentAdvertisement.peer.address == Fixture.address)
        #expect(await device.currentName == "DfuTarg")
    }

    @Test("Full update over GATT: CCCD, select, create, packets with PRN, checksum, execute, reset into the new app")
    func fullUpdate() async throws {
        let clock = ManualClock()
        var profile = Fixture.profile()
        profile.installed.application = nil  // starts in the bootloader
        let states = StateLog()
        let device = VirtualDevice(profile: profile, clock: clock, statusSink: { await states.append($0) })
        #expect(await device.mode == .bootloader)
        let image = Fixture.firmware(10_000)
        let dat = Fixture.initPacket(Fixture.command(for: image))
        var link = try await Link(device, clock: clock)
        let cp = try link.characteristic(SecureDFUUUID.controlPoint, in: SecureDFUUUID.service)
        let packet = try link.characteristic(SecureDFUUUID.packet, in: SecureDFUUUID.service)
        #expect(packet.properties == [.writeWithoutResponse])
        // The Packet characteristic refuses Write Requests.
        await #expect(throws: ATTClientError.self) {
            try await link.client.write(handle: packet.valueHandle, value: [0])
        }
        try await link.client.setNotifications(true, of: cp)

        func ask(_ bytes: [UInt8], resets: Bool = false) async throws -> [UInt8]? {
            do {
                try await link.client.write(handle: cp.valueHandle, value: bytes)
            } catch  where resets {
                // The device resets right after the last Execute: the Write Response may be lost with the link.
            }
            return await link.next()
        }
        func send(_ bytes: [UInt8]) async throws {
            for start in stride(from: 0, to: bytes.count, by: 244) {
                try await link.client.writeWithoutResponse(
                    handle: packet.valueHandle, value: Array(bytes[start..<min(start + 244, bytes.count)]))
            }
        }
        #expect(try await ask([0x06, 0x01]) == ControlPointResponse.select(maxSize: 512, offset: 0, crc: 0).encoded)
        #expect(
            try await ask(ControlPointRequest.create(type: .command, size: UInt32(dat.count)).encoded) == [
                0x60, 0x01, 0x01,
            ])
        #expect(try await ask([0x02, 0x00, 0x00]) == [0x60, 0x02, 0x01])
        try await send(dat)
        #expect(try await ask([0x03]) == checksumBytes(dat.count, CRC32.checksum(dat)))
        #expect(try await ask([0x04]) == [0x60, 0x04, 0x01])
        #expect(try await ask([0x02, 0x04, 0x00]) == [0x60, 0x02, 0x01])  // PRN 4
        #expect(try await ask([0x06, 0x02]) == ControlPointResponse.select(maxSize: 4096, offset: 0, crc: 0).encoded)
        var offset = 0
        while offset < image.count {
            let end = min(offset + 4096, image.count)
            #expect(
                try await ask(ControlPointRequest.create(type: .data, size: UInt32(end - offset)).encoded) == [
                    0x60, 0x01, 0x01,
                ])
            try await send(Array(image[offset..<end]))
            let packets = (end - offset + 243) / 244
            for index in 1...(packets / 4) {  // PRNs: offset and CRC after every 4th packet
                let at = min(offset + index * 4 * 244, end)
                #expect(await link.next() == checksumBytes(at, CRC32.checksum(image.prefix(at))))
            }
            #expect(try await ask([0x03]) == checksumBytes(end, CRC32.checksum(image.prefix(end))))
            #expect(try await ask([0x04], resets: end == image.count) == [0x60, 0x04, 0x01])
            offset = end
        }
        await link.serving.value  // the bootloader resets after the last Execute
        #expect(await device.mode == .application)
        let state = await device.state()
        #expect(
            state.installed.application
                == InstalledImage(version: 2, size: 10_000, sha256: DFUSimulatorDigest.sha256Hex(image)))
        #expect(state.counters.prnsSent == 10)
        #expect(await states.count > 0)
        // Back in the application, the Firmware Revision shows the new version.
        let app = try await Link(device, clock: clock)
        let revision = try app.characteristic(SimulatorUUID.firmwareRevision, in: SimulatorUUID.deviceInformation)
        #expect(try await app.client.read(handle: revision.valueHandle) == Array("2".utf8))
    }

    @Test("The link model paces PDUs: a Read Request is answered only after the modelled round trip (2 × 30 ms)")
    func pacing() async throws {
        let clock = ManualClock()
        var profile = Fixture.profile()
        profile.speedup = 1
        profile.link.connectionIntervalMs = 30
        let device = VirtualDevice(profile: profile, clock: clock)
        let (central, peripheral) = InMemoryBearer.makePair()
        let serving = Task { await device.serve(peripheral) }
        // Read Request (0x0A) for handle 0x0003, the Device Name value.
        try await central.send([0x0A, 0x03, 0x00])
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(59))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .milliseconds(1))
        #expect(try await central.receive() == [0x0B] + Array("Bracelet".utf8))  // Read Response
        await central.close()
        await serving.value
        #expect(await device.state().connected == false)
    }
}

actor StateLog {
    var states: [DeviceState] = []
    func append(_ state: DeviceState) { states.append(state) }
    var count: Int { states.count }
}
