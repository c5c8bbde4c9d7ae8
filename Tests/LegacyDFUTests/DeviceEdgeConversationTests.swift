import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// The SDK 11 bootloader model at the edges of its input (issue 15 point 7, device side): writes shorter than any
/// request, empty writes, and every sizes packet shorter than 12 bytes (`ble_dfu.c on_ctrl_pt_write`,
/// `dfu_transport_ble.c start_data_process`; legacy-dfu.md §3.1, §4).
@Suite(.timeLimit(.minutes(5))) struct DeviceEdgeConversationTests {
    static let nrf51 = BootloaderConversationTests.nrf51

    /// `08` without its 16-bit count: ble_dfu.c answers `10 08 03` (shorter than 3 bytes); the PRN setting is
    /// unchanged.
    @Test func prnRequestAlone() {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.cp([0x08, 0x04, 0x00]).isEmpty)
        #expect(c.cp([0x08]) == [answer(0x08, 0x03)])
        #expect(c.device.prnTarget == 4)
    }

    /// An empty Control Point write carries no opcode (the SDK reads `data[0]` of an empty write, a byte it was
    /// not sent: the model ignores it); nothing is answered and the state is unchanged, so the next request works.
    @Test func emptyControlPointWrite() {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.cp([]).isEmpty)
        #expect(c.device.state == .idle && c.attErrors.isEmpty)
        #expect(c.prepare(size: 1000, initPacket: BootloaderConversationTests.initPacket) == [answer(0x02, 0x01)])
    }

    /// Sizes packets of 0 to 11 bytes after Start: `start_data_process` answers `10 01 03` (not 12 bytes) and
    /// nothing is erased; 12 bytes then start the update.
    @Test(arguments: Array(0...11))
    func shortSizesPacket(length: Int) {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.cp([0x01, 0x04]).isEmpty)
        let sizes = LegacyStartSizes(application: 1000).encoded
        #expect(c.packet(Array(sizes.prefix(length))) == [answer(0x01, 0x03)], "\(length) bytes")
        #expect(c.device.state == .idle)
        #expect(c.device.installed.application != nil && c.device.bank0 == .validApp)
    }

    /// An empty Packet write while the device waits for the init packet or for data: nothing is stored, counted or
    /// answered (a multiple of 4 bytes: zero); the image then goes on and validates.
    @Test func emptyPacketWrites() {
        var c = LegacyConversation(Self.nrf51)
        let image = BootloaderConversationTests.image
        _ = c.cp([0x01, 0x04])
        #expect(c.packet(LegacyStartSizes(application: UInt32(image.count)).encoded) == [answer(0x01, 0x01)])
        _ = c.cp([0x02, 0x00])
        #expect(c.packet([]).isEmpty)
        _ = c.send(BootloaderConversationTests.initPacket)
        #expect(c.cp([0x02, 0x01]) == [answer(0x02, 0x01)])
        #expect(c.cp([0x03]).isEmpty)
        #expect(c.packet([]).isEmpty)
        #expect(c.device.dataReceived == 0 && c.device.bytesAccepted == 0)
        #expect(c.send(image).last == answer(0x03, 0x01))
        #expect(c.cp([0x04]) == [answer(0x04, 0x01)])
    }
}

/// SDK 11 dual bank: a power loss while Activate copies bank 1 into bank 0 (`power-loss-at=after-activate`) leaves a
/// partly copied application that the settings still call valid: the device boots it (legacy-dfu.md §7.5, inferred).
/// Without the fault the whole image is installed.
@Suite(.timeLimit(.minutes(2))) struct DualBankCopyPowerLossTests {
    @Test func aPartlyCopiedApplicationBoots() throws {
        let image = LegacyFixture.firmware(8192)
        let initPacket = LegacyInitPacket(
            layout: .v05, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 2, softdeviceReq: [0xFFFE],
            image: image
        ).encode()
        for (plan, whole) in [("", true), ("power-loss-at=after-activate", false)] {
            var c = LegacyConversation(DeviceEdgeConversationTests.nrf51, faults: try FaultPlan(parsing: plan))
            #expect(c.prepare(size: image.count, initPacket: initPacket) == [answer(0x02, 0x01)])
            _ = c.cp([0x03])
            #expect(c.send(image).last == answer(0x03, 0x01))
            #expect(c.cp([0x04]) == [answer(0x04, 0x01)])
            #expect(c.cp([0x05]).isEmpty)
            #expect(c.rebooted == .application, "\(plan)")
            #expect(c.device.bank0 == .validApp)
            let installed = c.device.installed.application?.sha256
            if whole {
                #expect(installed == LegacyFixture.sha(image))
            } else {
                // Half the pages (0x400 on the nRF51) copied, the rest erased.
                let partial = Array(image.prefix(4096)) + [UInt8](repeating: 0xFF, count: image.count - 4096)
                #expect(installed == LegacyFixture.sha(partial), "\(plan)")
                #expect(c.device.faultLog.map(\.kind) == ["power-loss"])
            }
        }
    }
}
