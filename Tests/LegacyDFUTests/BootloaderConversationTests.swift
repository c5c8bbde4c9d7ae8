import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// Conversation scripts against the SDK 11 bootloader model: host writes X, the device answers Y
/// (`dfu_transport_ble.c`, `ble_dfu.c`, `dfu_dual_bank.c`; legacy-dfu.md §3–§7).
@Suite(.timeLimit(.minutes(5))) struct BootloaderConversationTests {
    static let nrf51 = LegacyFixture.instant(.sdk11NRF51(address: LegacyFixture.address))
    static let image = LegacyFixture.firmware(1000)
    static let initPacket = LegacyInitPacket(
        layout: .v05, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 2, softdeviceReq: [0xFFFE],
        image: image
    ).encode()

    /// Start DFU: `01 04`, no answer; the 12-byte sizes; `10 01 01` once the erase completed.
    @Test func startAnswersAfterTheErase() {
        var profile = Self.nrf51
        profile.speedup = 1
        var c = LegacyConversation(profile)
        #expect(c.cp([0x01, 0x04]).isEmpty)
        #expect(c.packet(LegacyStartSizes(application: 1000).encoded).isEmpty)  // erasing bank 1 (66 pages)
        #expect(c.device.state == .preparing)
        #expect(c.advance(.milliseconds(1000)).isEmpty)
        // dfu_prepare_func_swap_erase clears all of bank 1: 0x21000 / 2 = 66 pages of 22 ms.
        #expect(c.advance(.milliseconds(500)) == [answer(0x01, 0x01)])
        #expect(c.device.state == .ready)
    }

    @Test(arguments: [
        // sizes of 11 bytes → not supported
        ([0x01, 0x04], Array(LegacyStartSizes(application: 1000).encoded.prefix(11)), [0x10, 0x01, 0x03]),
        // application together with the bootloader (type 0x06) → not supported
        ([0x01, 0x06], LegacyStartSizes(bootloader: 1000, application: 1000).encoded, [0x10, 0x01, 0x03]),
        // application size not a multiple of 4 → not supported
        ([0x01, 0x04], LegacyStartSizes(application: 1001).encoded, [0x10, 0x01, 0x03]),
        // bootloader of 0x3C04 bytes > DFU_BL_IMAGE_MAX_SIZE 0x3C00 → data size exceeds limit
        ([0x01, 0x02], LegacyStartSizes(bootloader: 0x3C04).encoded, [0x10, 0x01, 0x04]),
        // application larger than BANKED (0x10800 on an nRF51 with S130 2.0) → data size exceeds limit
        ([0x01, 0x04], LegacyStartSizes(application: 0x10804).encoded, [0x10, 0x01, 0x04]),
        // SoftDevice + bootloader larger than FULL (0x21000) → data size exceeds limit
        ([0x01, 0x03], LegacyStartSizes(softdevice: 0x1E000, bootloader: 0x3004).encoded, [0x10, 0x01, 0x04]),
    ] as [([UInt8], [UInt8], [UInt8])])
    func startRefusals(request: [UInt8], sizes: [UInt8], expected: [UInt8]) {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.cp(request).isEmpty)
        #expect(c.packet(sizes) == [expected])
        #expect(c.device.state == .idle)
    }

    /// A second Start in the same bootloader session: the sizes are stored, then "invalid state" (step 7).
    @Test func secondStartIsInvalidState() {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.prepare(size: 1000, initPacket: Self.initPacket) == [answer(0x02, 0x01)])
        _ = c.cp([0x01, 0x04])
        #expect(c.packet(LegacyStartSizes(application: 2000).encoded) == [answer(0x01, 0x02)])
        #expect(c.device.startSizes.application == 2000)  // overwritten before the state check
    }

    /// ble_dfu.c length checks and unknown opcodes.
    @Test(arguments: [
        ([0x01], [0x10, 0x01, 0x06]),  // Start without a type
        ([0x02], [0x10, 0x02, 0x06]),  // Initialize without a step
        ([0x08, 0x0A], [0x10, 0x08, 0x03]),  // PRN request without its second byte
        ([0x09], [0x10, 0x09, 0x03]),  // unknown opcode
        ([0x42, 0x00], [0x10, 0x42, 0x03]),
    ] as [([UInt8], [UInt8])])
    func malformedRequests(request: [UInt8], expected: [UInt8]) {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.cp(request) == [expected])
    }

    /// Control Point writes need notifications on (ATT 0xFD); the Packet characteristic takes no Write Request (0x03).
    @Test func attRefusals() {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.cp([0x01, 0x04], cccd: false).isEmpty)
        #expect(c.packet([0, 0, 0, 0], withResponse: true).isEmpty)
        #expect(c.attErrors == [0xFD, 0x03])
    }

    @Test func initPacketChecks() {
        // Init data before Start finished → 10 02 02.
        var early = LegacyConversation(Self.nrf51)
        _ = early.cp([0x02, 0x00])
        #expect(early.packet(Array(Self.initPacket.prefix(12))) == [answer(0x02, 0x02)])
        // 02 01 without init data → 10 02 02 (dfu_init_pkt_complete: not RX_INIT_PKT).
        var empty = LegacyConversation(Self.nrf51)
        _ = empty.cp([0x01, 0x04])
        _ = empty.packet(LegacyStartSizes(application: 1000).encoded)
        #expect(empty.cp([0x02, 0x01]) == [answer(0x02, 0x02)])
        // More than m_init_packet (128 bytes) → 10 02 06 on the write that overflows.
        var long = LegacyConversation(Self.nrf51)
        _ = long.cp([0x01, 0x04])
        _ = long.packet(LegacyStartSizes(application: 1000).encoded)
        _ = long.cp([0x02, 0x00])
        #expect(long.send([UInt8](repeating: 0xAA, count: 140)) == [answer(0x02, 0x06)])
        // The installed SoftDevice (0x80) is not in the list [0x0064] → 10 02 06.
        var softdevice = LegacyConversation(Self.nrf51)
        let other = LegacyInitPacket(
            layout: .v05, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 1, softdeviceReq: [0x64], image: Self.image)
        #expect(softdevice.prepare(size: 1000, initPacket: other.encode()) == [answer(0x02, 0x06)])
        // Shorter than dfu_init_packet_t + 2 → 10 02 06; the host may send it again (length reset).
        var short = LegacyConversation(Self.nrf51)
        #expect(short.prepare(size: 1000, initPacket: Array(Self.initPacket.prefix(11))) == [answer(0x02, 0x06)])
        _ = short.cp([0x02, 0x00])
        _ = short.send(Self.initPacket)
        #expect(short.cp([0x02, 0x01]) == [answer(0x02, 0x01)])
    }

    /// A device type in UICR is checked (SDK 11 template), so is the revision.
    @Test func uicrDeviceTypeAndRevision() {
        var profile = Self.nrf51
        profile.deviceType = 0x1234
        var c = LegacyConversation(profile)
        #expect(c.prepare(size: 1000, initPacket: Self.initPacket) == [answer(0x02, 0x06)])
        let fitting = LegacyInitPacket(
            layout: .v05, deviceType: 0x1234, deviceRevision: 0xFFFF, applicationVersion: 1, softdeviceReq: [0xFFFE], image: Self.image)
        _ = c.cp([0x02, 0x00])
        _ = c.send(fitting.encode())
        #expect(c.cp([0x02, 0x01]) == [answer(0x02, 0x01)])
    }

    @Test func dataRules() {
        // Data before the init packet is complete → 10 03 02.
        var early = LegacyConversation(Self.nrf51)
        _ = early.cp([0x01, 0x04])
        _ = early.packet(LegacyStartSizes(application: 1000).encoded)
        _ = early.cp([0x03])
        #expect(early.packet([1, 2, 3, 4]) == [answer(0x03, 0x02)])
        // Not word-sized → 10 03 03; beyond the image → 10 03 04 for it and every later write.
        var c = LegacyConversation(Self.nrf51)
        #expect(c.prepare(size: 40, initPacket: Self.initPacket) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        #expect(c.packet([1, 2, 3]) == [answer(0x03, 0x03)])
        #expect(c.packet([UInt8](repeating: 1, count: 20)).isEmpty)
        // Longer than MAX_DFU_PKT_LEN (20): the SoftDevice drops the Write Command without a trace.
        #expect(c.packet([UInt8](repeating: 1, count: 24)).isEmpty)
        #expect(c.device.counters.packetsDropped == 1 && c.device.dataReceived == 20)
        #expect(c.packet([UInt8](repeating: 1, count: 8)).isEmpty)
        #expect(c.packet([UInt8](repeating: 1, count: 16)) == [answer(0x03, 0x04)])  // 44 > 40
        #expect(c.packet([UInt8](repeating: 1, count: 4)) == [answer(0x03, 0x04)])
        #expect(c.device.dataReceived == 0xFFFF_FFFF)
    }

    /// PRN every 2 accepted packets with the byte count; none for the last packet, which gets 10 03 01 instead; 07
    /// reports the count; Validate; Activate resets into the new application.
    @Test func receiptsValidateActivate() {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.prepare(size: Self.image.count, initPacket: Self.initPacket) == [answer(0x02, 0x01)])
        #expect(c.cp([0x08, 0x02, 0x00]).isEmpty)
        #expect(c.cp([0x03]).isEmpty)
        #expect(c.packet(Array(Self.image[0..<20])).isEmpty)
        #expect(c.packet(Array(Self.image[20..<40])) == [[0x11, 0x28, 0x00, 0x00, 0x00]])  // 40 bytes
        #expect(c.cp([0x07]) == [[0x10, 0x07, 0x01, 0x28, 0x00, 0x00, 0x00]])
        #expect(c.cp([0x04]) == [answer(0x04, 0x02)])  // Validate before all data
        let rest = c.send(Array(Self.image[40...]))
        #expect(rest.count == 24)  // receipts after 60, 80, ... 980 bytes; none for the 50th packet
        #expect(rest.last == answer(0x03, 0x01))
        #expect(c.cp([0x07]) == [[0x10, 0x07, 0x01, 0xE8, 0x03, 0x00, 0x00]])  // 1000
        #expect(c.cp([0x04]) == [answer(0x04, 0x01)])
        #expect(c.cp([0x05]).isEmpty)
        #expect(c.rebooted == .application)
        #expect(c.device.installed.application?.sha256 == LegacyFixture.sha(Self.image))
        #expect(c.device.counters.updatesCompleted == 1)
    }

    /// A CRC error leaves the state in VALIDATE: a second Validate is "invalid state".
    @Test func crcErrorThenInvalidState() {
        var c = LegacyConversation(Self.nrf51)
        var wrong = Self.image
        wrong[500] ^= 0xFF
        #expect(c.prepare(size: wrong.count, initPacket: Self.initPacket) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        #expect(c.send(wrong).last == answer(0x03, 0x01))
        #expect(c.cp([0x04]) == [answer(0x04, 0x05)])
        #expect(c.cp([0x04]) == [answer(0x04, 0x02)])
        // Activate in the wrong state resets (dfu_reset): the old application (dual bank) starts.
        #expect(c.cp([0x05]).isEmpty)
        #expect(c.rebooted == .application)
        #expect(c.device.installed.application?.sha256 == "")
    }

    /// The same check on every init packet layout: the SDK 11 template reads a CRC-16 from the first two bytes of the
    /// extension, so 0.6, 0.7 and 0.8 (signed: id 2, length, SHA-256, 64-byte signature; 116 bytes, within the dual
    /// bank's 128) packets pass Initialize and fail Validate (legacy-dfu.md §5.3-5.4).
    @Test(arguments: [LegacyInitPacket.Layout.v05, .v06, .v07, .v08])
    func initLayouts(layout: LegacyInitPacket.Layout) {
        var c = LegacyConversation(Self.nrf51)
        let packet = LegacyInitPacket(
            layout: layout, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 1, softdeviceReq: [0xFFFE], image: Self.image)
        #expect(c.prepare(size: Self.image.count, initPacket: packet.encode()) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        _ = c.send(Self.image)
        #expect(c.cp([0x04]) == [answer(0x04, layout == .v05 ? 0x01 : 0x05)])
    }

    /// A 0.8 init packet (116 bytes) on a single-bank device: more than its 64-byte init buffer, so Initialize DFU
    /// Parameters is refused with NRF_ERROR_INVALID_LENGTH → `10 02 06` (legacy-dfu.md §5.3).
    @Test func signedInitPacketOverflowsASingleBank() {
        var profile = Self.nrf51
        profile.dualBank = false
        profile.initPacketCapacity = 64
        var c = LegacyConversation(profile)
        let packet = LegacyInitPacket(
            layout: .v08, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 1, softdeviceReq: [0xFFFE], image: Self.image)
        #expect(packet.encode().count == 116)
        _ = c.cp([0x01, 0x04])
        #expect(c.packet(LegacyStartSizes(application: UInt32(Self.image.count)).encoded) == [answer(0x01, 0x01)])
        _ = c.cp([0x02, 0x00])
        // 20-byte writes: the first three fit (60 bytes), the fourth would make 80: refused, and so is every later one.
        #expect(c.send(Array(packet.encode().prefix(60))).isEmpty)
        #expect(c.send(Array(packet.encode().dropFirst(60))) == [answer(0x02, 0x06), answer(0x02, 0x06), answer(0x02, 0x06)])
    }

    /// Reset: dual bank keeps the old application (it starts); single bank erased it at Start, so the device stays
    /// in the bootloader: a device that lost its application.
    @Test(arguments: [true, false])
    func resetMidTransfer(dualBank: Bool) {
        var profile = Self.nrf51
        profile.dualBank = dualBank
        profile.initPacketCapacity = dualBank ? 128 : 64
        var c = LegacyConversation(profile)
        #expect(c.prepare(size: Self.image.count, initPacket: Self.initPacket) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        _ = c.send(Array(Self.image[0..<200]))
        #expect(c.cp([0x06]).isEmpty)
        #expect(c.rebooted == (dualBank ? .application : .bootloader))
        #expect((c.device.installed.application != nil) == dualBank)
        #expect(c.device.bank0 == (dualBank ? .validApp : .invalid))
    }

    /// A disconnect keeps the transfer state (on_ble_evt); Start in the next connection is "invalid state".
    @Test func stateSurvivesADisconnect() {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.prepare(size: Self.image.count, initPacket: Self.initPacket) == [answer(0x02, 0x01)])
        _ = c.device.handle(.disconnected, at: c.now)
        _ = c.device.handle(.connected, at: c.now)
        _ = c.cp([0x01, 0x04])
        #expect(c.packet(LegacyStartSizes(application: 1000).encoded) == [answer(0x01, 0x02)])
    }

    /// The DFU timer (120 s): without activity the bootloader closes the link and leaves (the application starts).
    @Test func inactivityTimeout() {
        var c = LegacyConversation(Self.nrf51)
        #expect(c.prepare(size: Self.image.count, initPacket: Self.initPacket) == [answer(0x02, 0x01)])
        #expect(c.advance(.seconds(119)).isEmpty)
        #expect(c.rebooted == nil)
        _ = c.advance(.seconds(2))
        #expect(c.rebooted == .application)
    }

    /// The last write completes after the central disconnected: `ble_dfu_response_send` fails without a connection
    /// and APP_ERROR_CHECK resets the chip (legacy-dfu.md §3.2, inferred).
    @Test func lastAnswerWithoutAConnectionResets() {
        var profile = Self.nrf51
        profile.speedup = 1
        var c = LegacyConversation(profile)
        _ = c.cp([0x01, 0x04])
        _ = c.packet(LegacyStartSizes(application: 40).encoded)
        _ = c.advance(.seconds(3))
        _ = c.cp([0x02, 0x00])
        _ = c.send(Self.initPacket)
        #expect(c.cp([0x02, 0x01]) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        _ = c.send(Array(Self.image[0..<40]))
        _ = c.device.handle(.disconnected, at: c.now)
        _ = c.advance(.milliseconds(5))
        #expect(c.rebooted == .application)
    }
}
