import BLECore
import DFUProtocol
import DFUSimulator
import Foundation
import Testing

@Suite("Flash and settings kept across simulator runs", .timeLimit(.minutes(5)))
struct PersistentStateTests {
    let image = Fixture.firmware(10_000)

    /// Init executed, 2 of 3 data objects executed, part of the third sent (not executed).
    func interrupted(saveProgress: Bool) -> Conversation {
        var c = Conversation(Fixture.profile(saveProgress: saveProgress))
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: image))) == [0x60, 0x04, 0x01])
        _ = c.ask([0x06, 0x02])
        let executed = c.sendData(Array(image.prefix(8192)))
        #expect(executed.filter { $0 == [0x60, 0x04, 0x01] }.count == 2)
        _ = c.ask(ControlPointRequest.create(type: .data, size: 1808).encoded)
        _ = c.send(Array(image[8192..<9000]))
        return c
    }

    /// The snapshot through JSON, as the CLI writes and reads it.
    func roundTrip(_ state: DevicePersistentState) throws -> DevicePersistentState {
        try JSONDecoder().decode(DevicePersistentState.self, from: JSONEncoder().encode(state))
    }

    func snapshot(_ c: Conversation) -> DevicePersistentState {
        let flash = c.machine.persistentSnapshot
        return DevicePersistentState(
            mode: .bootloader, installed: flash.installed, settings: flash.settings, bank: flash.bank)
    }

    @Test("With save_progress a new device restored from the snapshot resumes at the last executed object")
    func resumeWithSaveProgress() async throws {
        let c = interrupted(saveProgress: true)
        let restored = try roundTrip(snapshot(c))
        #expect(restored == snapshot(c))
        #expect(restored.bank == Array(image.prefix(8192)))

        // A new VirtualDevice loads it as after a power cycle.
        let device = VirtualDevice(
            profile: Fixture.profile(saveProgress: true), clock: ContinuousClock(), restoring: restored)
        #expect(await device.mode == .bootloader)
        let state = await device.state()
        #expect(state.settings.dataOffset == 8192)
        #expect(state.settings.dataCRC == CRC32.checksum(image.prefix(8192)))
        #expect(state.settings.initCommandValid)
        #expect(try await roundTrip(device.persistentState()) == restored)

        // A fresh bootloader restored from the snapshot: Select Data reports offset and CRC, the rest installs.
        var fresh = Conversation(Fixture.profile(saveProgress: true))
        fresh.machine.restore(installed: restored.installed, settings: restored.settings, bank: restored.bank)
        let select = ControlPointResponse.select(maxSize: 4096, offset: 8192, crc: CRC32.checksum(image.prefix(8192)))
        #expect(fresh.ask([0x06, 0x02]) == [select.encoded])
        let rest = fresh.sendData(image, from: 8192)
        #expect(rest.last == [0x60, 0x04, 0x01])
        #expect(fresh.machine.installed.application?.version == 2)
        #expect(fresh.machine.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(image))
        #expect(fresh.machine.installed.application?.size == 10_000)
    }

    @Test("Without save_progress only the init command survives the snapshot")
    func onlyInitWithoutSaveProgress() throws {
        let c = interrupted(saveProgress: false)
        let restored = try roundTrip(snapshot(c))
        #expect(restored.settings.firmwareOffset == 0)
        #expect(restored.settings.offsetLast == 0)
        #expect(restored.bank.isEmpty)
        let dat = Fixture.initPacket(Fixture.command(for: image))
        #expect(restored.settings.initCommand == dat)

        var fresh = Conversation(Fixture.profile(saveProgress: false))
        fresh.machine.restore(installed: restored.installed, settings: restored.settings, bank: restored.bank)
        #expect(fresh.machine.initValid)
        #expect(fresh.ask([0x06, 0x02]) == [ControlPointResponse.select(maxSize: 4096, offset: 0, crc: 0).encoded])
        let command = ControlPointResponse.select(maxSize: 512, offset: UInt32(dat.count), crc: CRC32.checksum(dat))
        #expect(fresh.ask([0x06, 0x01]) == [command.encoded])
        #expect(fresh.sendData(image).last == [0x60, 0x04, 0x01])
        #expect(fresh.machine.installed.application?.version == 2)
    }

    @Test("The bank is hex in JSON and a non-hex bank is refused")
    func bankEncoding() throws {
        let state = DevicePersistentState(
            mode: .application, installed: Fixture.profile().installed, settings: BootloaderSettings(),
            bank: [0x00, 0xAB, 0xFF], advertisingName: "DfuX")
        let json = try #require(String(data: JSONEncoder().encode(state), encoding: .utf8))
        #expect(json.contains("\"00abff\""))
        #expect(try roundTrip(state) == state)
        let bad = json.replacingOccurrences(of: "00abff", with: "0g")
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(DevicePersistentState.self, from: Data(bad.utf8))
        }
    }
}
