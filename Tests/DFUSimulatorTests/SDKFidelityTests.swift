import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Testing

/// The simulator against the nRF5 SDK 15.0-17.1 sources (docs/simulator.md, "Settled against the SDK sources"):
/// repeated Execute, what a disconnect keeps per version, the settings write before the reset, the flash queue.
@Suite("SDK 15-17 fidelity", .timeLimit(.minutes(5)))
struct SDKFidelityTests {
    let image = Fixture.firmware(10_000)

    func ready(sdk: String = "15.3.0", queueDepth: Int = 64, saveProgress: Bool = false) -> Conversation {
        var c = Conversation(Fixture.profile(saveProgress: saveProgress, queueDepth: queueDepth, sdk: sdk))
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: image))) == [0x60, 0x04, 0x01])
        _ = c.ask([0x06, 0x02])
        return c
    }

    @Test(
        "An executed object executed again answers success (0 == 0 in on_data_obj_execute_request), every version",
        arguments: ["15.0.0", "15.3.0", "16.0.0", "17.1.0"])
    func repeatedExecuteSucceeds(sdk: String) {
        var c = ready(sdk: sdk)
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image.prefix(4096)))
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
        // Nothing moved: the next object starts at 4096 with the CRC of the first.
        #expect(c.ask([0x06, 0x02]) == [select(4096, CRC32.checksum(image.prefix(4096)))])
    }

    @Test("An object created and not written answers 0x08 to Execute", arguments: ["15.3.0", "17.1.0"])
    func createdUnwrittenObject(sdk: String) {
        var c = ready(sdk: sdk)
        _ = c.sendData(Array(image.prefix(4096)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x08]])
    }

    /// Android-DFU-Library#252 on SDK 15: the link drops right after Create Data; on the next connection Select Data
    /// says 4096 with a matching CRC, the host executes "to be sure", and the created, empty object answers 0x08.
    @Test("SDK 15 keeps its RAM state over a disconnect: the created object is still there, Execute → 0x08")
    func sdk15KeepsCreatedObject() {
        var c = ready(sdk: "15.3.0")
        _ = c.sendData(Array(image.prefix(4096)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.machine.handle(.disconnected, at: .zero)
        #expect(c.ask([0x06, 0x02]) == [select(4096, CRC32.checksum(image.prefix(4096)))])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x08]])
        // The host goes on with the object; the update completes.
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image[4096..<8192]))
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
    }

    @Test("SDK 16-17 reload the settings on a disconnect: the same Execute answers success (the object is forgotten)")
    func sdk17ReloadsSettings() {
        var c = ready(sdk: "17.1.0", saveProgress: true)
        _ = c.sendData(Array(image.prefix(4096)))
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image[4096..<5000]))
        _ = c.machine.handle(.disconnected, at: .zero)
        #expect(c.ask([0x06, 0x02]) == [select(4096, CRC32.checksum(image.prefix(4096)))])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
    }

    @Test("SDK 15 resumes a partly written object after a disconnect; SDK 17 without save_progress starts over")
    func partialObjectAcrossDisconnect() {
        var old = ready(sdk: "15.3.0")
        _ = old.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = old.send(Array(image.prefix(2000)))
        _ = old.machine.handle(.disconnected, at: .zero)
        #expect(old.ask([0x06, 0x02]) == [select(2000, CRC32.checksum(image.prefix(2000)))])
        var new = ready(sdk: "17.1.0")
        _ = new.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = new.send(Array(image.prefix(2000)))
        _ = new.machine.handle(.disconnected, at: .zero)
        #expect(new.ask([0x06, 0x02]) == [select(0, 0)])
    }

    @Test("The PRN target is a static of nrf_dfu_ble.c: it outlives the link, a reset clears it")
    func prnTargetOutlivesLink() {
        var c = ready(sdk: "17.1.0")
        _ = c.ask([0x02, 0x02, 0x00])
        _ = c.machine.handle(.disconnected, at: .zero)
        #expect(c.machine.prnTarget == 2)
        _ = c.machine.handle(.reset, at: .zero)
        #expect(c.machine.prnTarget == 0)
    }

    @Test(
        "The last Execute answers, then the settings (and from 15.3 their backup) are written before the reset",
        arguments: [("15.0.0", 1), ("15.3.0", 2), ("17.1.0", 2)])
    func lastExecuteWritesSettingsFirst(sdk: String, copies: Int) {
        var profile = Fixture.profile(sdk: sdk)
        profile.speedup = 1
        var c = Conversation(profile)
        let small = Fixture.firmware(3000)
        _ = c.sendInit(Fixture.initPacket(Fixture.command(for: small)))
        _ = c.ask([0x01, 0x02] + le32(3000))
        _ = c.send(small)
        c.now = .seconds(1)  // the erase and the writes are done
        let actions = c.cp([0x04])
        // Page erase 85 ms + 228 words (912-byte settings) × 41 µs = 94.348 ms per copy.
        #expect(actions == [.notify([0x60, 0x04, 0x01]), .resetAfterFlash(.microseconds(94_348 * copies), into: .application)])
        #expect(c.machine.installed.application?.size == 3000)
        // Requests while the reset is pending get no answer.
        #expect(c.ask([0x06, 0x02]) == [])
    }

    @Test("A SoftDevice update with a valid application stays in the bootloader for the application (continuation)")
    func softDeviceExpectsAdditionalUpdate() {
        var c = Conversation(Fixture.profile(sdk: "17.1.0"))
        let sd = Fixture.firmware(3000)
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: sd, type: .softdevice))) == [0x60, 0x04, 0x01])
        _ = c.ask([0x01, 0x02] + le32(3000))
        _ = c.send(sd)
        #expect(c.cp([0x04]) == [.notify([0x60, 0x04, 0x01]), .resetAfterFlash(.zero, into: .bootloader)])
        #expect(c.machine.installed.softdevice?.size == 3000)
    }

    @Test("A failed last Execute also resets, into the old application (dual bank: bank 1 invalidated)")
    func failedLastExecuteResets() {
        var c = Conversation(Fixture.profile(sdk: "17.1.0"))
        let small = Fixture.firmware(3000)
        var wrong = small
        wrong[10] ^= 0xFF
        _ = c.sendInit(Fixture.initPacket(Fixture.command(for: small)))
        _ = c.ask([0x01, 0x02] + le32(3000))
        _ = c.send(wrong)
        let actions = c.cp([0x04])
        #expect(actions == [.notify([0x60, 0x04, 0x0B, 0x0C]), .resetAfterFlash(.zero, into: .application)])
        #expect(c.machine.installed.application?.version == 1)
    }

    @Test("Create Data with the flash queue full: the erase cannot be queued → 0x05; after it drains → success")
    func createRefusedWhileQueueFull() {
        var profile = Fixture.profile(queueDepth: 2)
        profile.speedup = 1
        var c = Conversation(profile)
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: image))) == [0x60, 0x04, 0x01])
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])  // erase: queued until 85 ms
        _ = c.send(Array(image.prefix(244)))  // one write behind it: the queue of 2 is full
        // The host sees a bad CRC and creates the object again at once: on_data_obj_create_request cannot queue
        // the erase (nrf_dfu_flash_erase fails) and answers Invalid Object.
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x05]])
        #expect(c.machine.counters.createsRefused == 1)
        // Writes meanwhile are dropped: the queue is still full.
        _ = c.send(Array(image.prefix(244)))
        #expect(c.machine.settings.firmwareOffset == 0)
        #expect(c.machine.counters.packetsDropped == 1)
        c.now = .milliseconds(200)
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x01]])
        c.now = .milliseconds(300)  // its erase is done
        _ = c.send(Array(image.prefix(244)))
        #expect(c.ask([0x03]) == [checksumBytes(244, CRC32.checksum(image.prefix(244)))])
    }

    @Test("flash-busy-at fills the queue and then handles the request: Create Data → 0x05, Packet writes dropped")
    func flashBusyFault() throws {
        var profile = Fixture.profile(queueDepth: 16)
        profile.speedup = 1
        var c = Conversation(profile, faults: try FaultPlan(parsing: "flash-busy-at=before-create-data#2"))
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: image))) == [0x60, 0x04, 0x01])
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x01]])
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x05]])
        _ = c.ask([0x02, 0x01, 0x00])
        #expect(c.send(Array(image.prefix(244))) == [checksumBytes(0, 0)])
        #expect(c.machine.faultLog.map(\.kind) == ["flash-busy"])
        // 16 page erases later (the first erase, then 16 × 85 ms) the device takes the object.
        c.now = .milliseconds(85 * 17 + 1)
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x01]])
    }

    @Test("Power loss during an update: dual bank boots the old application, single bank stays in the bootloader")
    func powerLossBootMode() {
        for single in [false, true] {
            var profile = Fixture.profile(sdk: "17.1.0")
            profile.flash.singleBank = single
            var c = Conversation(profile)
            _ = c.sendInit(Fixture.initPacket(Fixture.command(for: image)))
            _ = c.sendData(Array(image.prefix(4096)))
            let actions = c.machine.handle(.powerLoss, at: .zero)
            #expect(actions == [.reboot(into: single ? .bootloader : .application)])
        }
    }

    @Test("Profile SDK versions: which reload on disconnect, which keep a settings backup")
    func versionFacts() {
        #expect(SDKVersion("15.3.0").reloadsSettingsOnDisconnect == false)
        #expect(SDKVersion("16.0.0").reloadsSettingsOnDisconnect)
        #expect(SDKVersion("17.1.0").reloadsSettingsOnDisconnect)
        #expect(SDKVersion("15.0.0").hasSettingsBackup == false)
        #expect(SDKVersion("15.3.0").hasSettingsBackup)
        #expect(SDKVersion("garbage") == SDKVersion("15.0"))
    }

    func select(_ offset: Int, _ crc: UInt32) -> [UInt8] {
        ControlPointResponse.select(maxSize: 4096, offset: UInt32(offset), crc: crc).encoded
    }
}
