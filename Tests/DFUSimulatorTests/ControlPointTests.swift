import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Testing

@Suite("Bootloader control point", .timeLimit(.minutes(5)))
struct ControlPointTests {
    @Test("A control point write before the CCCD is enabled is refused with ATT 0xFD")
    func cccdRequired() {
        var machine = BootloaderStateMachine(profile: Fixture.profile())
        let actions = machine.handle(.controlPointWrite([0x06, 0x01], cccdEnabled: false), at: .zero)
        #expect(actions == [.attError(.cccdImproperlyConfigured)])
        #expect(machine.counters.controlPointWrites == 0)
    }

    @Test("A Write Request on the Packet characteristic is refused (write without response only)")
    func packetWriteRequestRefused() {
        var machine = BootloaderStateMachine(profile: Fixture.profile())
        let actions = machine.handle(.packetWrite([1, 2, 3], withResponse: true), at: .zero)
        #expect(actions == [.attError(.writeNotPermitted)])
    }

    @Test("Select Command on a fresh device: max 512, offset 0, CRC 0")
    func selectCommandFresh() {
        var c = Conversation()
        // 60 06 01 | max 00 02 00 00 (512) | offset 0 | crc 0
        #expect(c.ask([0x06, 0x01]) == [[0x60, 0x06, 0x01, 0x00, 0x02, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]])
    }

    @Test("An SDK 14 bootloader has 256-byte command objects")
    func sdk14CommandSize() {
        var c = Conversation(Fixture.profile(sdk: "14.2.0"))
        // 60 06 01 | max 00 01 00 00 (256) | 0 | 0
        #expect(c.ask([0x06, 0x01]) == [[0x60, 0x06, 0x01, 0x00, 0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]])
        // Create Command 257 bytes → 0x04 insufficient resources.
        #expect(c.ask([0x01, 0x01, 0x01, 0x01, 0x00, 0x00]) == [[0x60, 0x01, 0x04]])
    }

    @Test("Select Data answers max 4096 with the current offset")
    func selectData() {
        var c = Conversation()
        #expect(c.ask([0x06, 0x02]) == [[0x60, 0x06, 0x01, 0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]])
    }

    @Test("Select or Create of an unknown object type → 0x07 unsupported type")
    func unknownType() {
        var c = Conversation()
        #expect(c.ask([0x06, 0x03]) == [[0x60, 0x06, 0x07]])
        #expect(c.ask([0x01, 0x03, 0x00, 0x10, 0x00, 0x00]) == [[0x60, 0x01, 0x07]])
    }

    @Test("Create Command: size 0 → 0x03, size 513 → 0x04, 100 → success")
    func createCommandSizes() {
        var c = Conversation()
        #expect(c.ask([0x01, 0x01, 0, 0, 0, 0]) == [[0x60, 0x01, 0x03]])
        #expect(c.ask([0x01, 0x01, 0x01, 0x02, 0, 0]) == [[0x60, 0x01, 0x04]])
        #expect(c.ask([0x01, 0x01, 100, 0, 0, 0]) == [[0x60, 0x01, 0x01]])
    }

    @Test("Opcodes 0x00, 0x07, 0x09, 0x0A, 0x0B get a bare 3-byte success header over BLE")
    func headerOnlyOpcodes() {
        var c = Conversation()
        #expect(c.ask([0x00]) == [[0x60, 0x00, 0x01]])
        #expect(c.ask([0x07]) == [[0x60, 0x07, 0x01]])
        #expect(c.ask([0x09, 0x2A]) == [[0x60, 0x09, 0x01]])
        #expect(c.ask([0x0A]) == [[0x60, 0x0A, 0x01]])
        #expect(c.ask([0x0B, 0x00]) == [[0x60, 0x0B, 0x01]])
    }

    @Test("A reduced-protocol bootloader answers those opcodes with 0x02")
    func reducedProtocol() {
        var profile = Fixture.profile()
        profile.protocolReduced = true
        var c = Conversation(profile)
        #expect(c.ask([0x00]) == [[0x60, 0x00, 0x02]])
        #expect(c.ask([0x0A]) == [[0x60, 0x0A, 0x02]])
    }

    @Test("Unknown opcodes and Write over the control point → 0x02; a truncated request → 0x03")
    func unknownOpcode() {
        var c = Conversation()
        #expect(c.ask([0x05]) == [[0x60, 0x05, 0x02]])
        #expect(c.ask([0x42, 1, 2]) == [[0x60, 0x42, 0x02]])
        #expect(c.ask([0x08, 1, 2, 3]) == [[0x60, 0x08, 0x02]])
        #expect(c.ask([0x01, 0x01, 0x10]) == [[0x60, 0x01, 0x03]])  // Create needs type + u32 size
    }

    @Test("Checksum without a selected object → 0x05 invalid object")
    func checksumWithoutObject() {
        var c = Conversation()
        #expect(c.ask([0x03]) == [[0x60, 0x03, 0x05]])
    }

    @Test("Init packet: checksum follows the received bytes, Execute validates, a repeat succeeds again")
    func initPacketFlow() {
        var c = Conversation()
        let image = Fixture.firmware(5000)
        let dat = Fixture.initPacket(Fixture.command(for: image))
        #expect(
            c.ask(ControlPointRequest.create(type: .command, size: UInt32(dat.count)).encoded) == [[0x60, 0x01, 0x01]])
        // Execute before all bytes arrived → 0x08.
        _ = c.send(Array(dat.prefix(10)))
        #expect(c.ask([0x03]) == [checksumBytes(10, CRC32.checksum(dat.prefix(10)))])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x08]])
        _ = c.send(Array(dat.dropFirst(10)))
        #expect(c.ask([0x03]) == [checksumBytes(dat.count, CRC32.checksum(dat))])
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
        #expect(c.machine.initValid)
        // nrf_dfu_validation_init_cmd_execute: an init command already validated since the reset → success.
        #expect(c.ask([0x04]) == [[0x60, 0x04, 0x01]])
        // Select Command reports the whole init packet.
        let select = ControlPointResponse.select(maxSize: 512, offset: UInt32(dat.count), crc: CRC32.checksum(dat))
        #expect(c.ask([0x06, 0x01]) == [select.encoded])
    }

    @Test("Init bytes beyond the created size are refused (0x03, visible only through a PRN)")
    func initOverflow() {
        var c = Conversation()
        _ = c.ask([0x02, 0x01, 0x00])  // PRN every packet
        _ = c.ask([0x01, 0x01, 4, 0, 0, 0])
        #expect(c.send([1, 2, 3]) == [checksumBytes(3, CRC32.checksum([1, 2, 3]))])
        #expect(c.send([4, 5]) == [[0x60, 0x03, 0x03]])
    }

    @Test("Create Command wipes all progress, including a validated init")
    func createCommandWipes() {
        var c = Conversation()
        let image = Fixture.firmware(5000)
        #expect(c.sendInit(Fixture.initPacket(Fixture.command(for: image))) == [0x60, 0x04, 0x01])
        _ = c.ask([0x01, 0x02, 0x00, 0x10, 0, 0])
        _ = c.send(Array(image.prefix(1000)))
        _ = c.ask([0x01, 0x01, 10, 0, 0, 0])
        #expect(!c.machine.initValid)
        #expect(c.machine.settings.firmwareOffset == 0)
        #expect(c.ask([0x01, 0x02, 0x00, 0x10, 0, 0]) == [[0x60, 0x01, 0x08]])
    }

    @Test("Abort resets at once without a response")
    func abort() {
        var c = Conversation()
        let actions = c.cp([0x0C])
        #expect(actions == [.reboot(into: .application)])
    }

    @Test("An SDK 12-14 bootloader has no Abort: it answers Op code not supported and stays")
    func abortBeforeSDK15() {
        for sdk in ["12.3.0", "14.2.0"] {
            var c = Conversation(Fixture.profile(sdk: sdk))
            // 60 0C 02: response to Abort, Op code not supported; no reboot
            #expect(c.cp([0x0C]) == [.notify([0x60, 0x0C, 0x02])], "SDK \(sdk)")
            // Still in the bootloader, taking requests: 60 06 01 | max 256 | offset 0 | crc 0
            #expect(c.ask([0x06, 0x01]) == [[0x60, 0x06, 0x01, 0x00, 0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]], "SDK \(sdk)")
        }
        var sdk15 = Conversation(Fixture.profile(sdk: "15.0.0"))
        #expect(sdk15.cp([0x0C]) == [.reboot(into: .application)])
    }
}
