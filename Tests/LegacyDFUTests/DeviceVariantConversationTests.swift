import ATT
import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// Flow control (SDK 11 refuses, Adafruit busy-waits), Adafruit's init checks, InfiniTime's service and the
/// application's buttonless entry, as conversation scripts.
@Suite(.timeLimit(.minutes(5))) struct DeviceVariantConversationTests {
    static let image = LegacyFixture.firmware(2000)

    static func initPacket(type: UInt16 = 0xFFFF, revision: UInt16 = 0xFFFF, image: [UInt8] = image) -> [UInt8] {
        LegacyInitPacket(
            layout: .v05, deviceType: type, deviceRevision: revision, applicationVersion: 3, softdeviceReq: [0xFFFE], image: image
        ).encode()
    }

    /// SDK 11 with a flash four times slower than the link: after 8 writes waiting for the flash (8 RX buffers)
    /// the next packet is refused with `10 03 06`, not written and not counted (app_data_process).
    @Test func sdk11RefusesWhenTheRXBuffersAreFull() {
        var profile = LegacyDeviceProfile.sdk11NRF52(address: LegacyFixture.address)
        profile.flash.wordWriteMicros = 400  // 2 ms per 20-byte packet
        var c = LegacyConversation(profile)
        _ = c.cp([0x01, 0x04])
        _ = c.packet(LegacyStartSizes(application: UInt32(Self.image.count)).encoded)
        _ = c.advance(.seconds(5))
        _ = c.cp([0x02, 0x00])
        _ = c.send(Self.initPacket())
        #expect(c.cp([0x02, 0x01]) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        var answers: [[UInt8]] = []
        for index in 0..<10 { answers += c.packet(Array(Self.image[index * 20..<index * 20 + 20])) }
        #expect(answers == [answer(0x03, 0x06), answer(0x03, 0x06)])
        #expect(c.device.counters.packetsRefused == 2)
        #expect(c.device.bytesAccepted == 160)
    }

    /// Adafruit: the RX pool (16 × 600) refuses like SDK 11; a full pstorage queue makes the event handler
    /// busy-wait for a slot instead (`is_ota()` loop in dfu_single_bank.c): the write is taken after a wait.
    @Test func adafruitWaitsForAFlashSlot() {
        var profile = LegacyDeviceProfile.adafruitNRF52832(address: LegacyFixture.address)
        profile.flash.wordWriteMicros = 400
        profile.receiveBuffers = 32  // more buffers than queue slots, so that the queue fills first
        var c = LegacyConversation(profile)
        _ = c.cp([0x01, 0x04])
        _ = c.packet(LegacyStartSizes(application: UInt32(Self.image.count)).encoded)
        _ = c.advance(.seconds(5))
        _ = c.cp([0x02, 0x00])
        _ = c.send(Self.initPacket(type: 0x0052))
        #expect(c.cp([0x02, 0x01]) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        var answers: [[UInt8]] = []
        for index in 0..<24 { answers += c.packet(Array(Self.image[index * 20..<index * 20 + 20])) }
        #expect(answers.isEmpty)
        #expect(c.waited > .zero)
        #expect(c.device.bytesAccepted == 480)
    }

    /// Adafruit's `dfu_init.c`: device type 0x0052 or "operation failed"; SoftDevice and bootloader updates also
    /// need the board's revision (0xADAF on the nRF52832).
    @Test func adafruitInitChecks() {
        let profile = LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address))
        var nordicDefaults = LegacyConversation(profile)
        #expect(nordicDefaults.prepare(size: Self.image.count, initPacket: Self.initPacket()) == [answer(0x02, 0x06)])
        var adafruit = LegacyConversation(profile)
        #expect(adafruit.prepare(size: Self.image.count, initPacket: Self.initPacket(type: 0x0052)) == [answer(0x02, 0x01)])
        // A bootloader image with the nRF52840 revision on an nRF52832 board: refused.
        let bootloader = LegacyFixture.firmware(4000)
        var wrongBoard = LegacyConversation(profile)
        _ = wrongBoard.cp([0x01, 0x02])
        #expect(wrongBoard.packet(LegacyStartSizes(bootloader: 4000).encoded) == [answer(0x01, 0x01)])
        _ = wrongBoard.cp([0x02, 0x00])
        _ = wrongBoard.send(Self.initPacket(type: 0x0052, revision: 52840, image: bootloader))
        #expect(wrongBoard.cp([0x02, 0x01]) == [answer(0x02, 0x06)])
    }

    /// Adafruit restarts into itself after a Reset that cut a transfer short (`restart_into_bootloader`).
    @Test func adafruitResetStaysInTheBootloader() {
        var profile = LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address))
        profile.dualBank = true
        var c = LegacyConversation(profile)
        #expect(c.prepare(size: Self.image.count, initPacket: Self.initPacket(type: 0x0052)) == [answer(0x02, 0x01)])
        _ = c.cp([0x03])
        _ = c.send(Array(Self.image[0..<100]))
        _ = c.cp([0x06])
        #expect(c.rebooted == .bootloader)
        #expect(c.device.installed.application != nil)  // dual bank: the old application is still there
    }
}

/// InfiniTime's `DfuService.cpp` as a conversation.
@Suite(.timeLimit(.minutes(5))) struct InfiniTimeConversationTests {
    static let profile = LegacyDeviceProfile.pineTime(address: LegacyFixture.address)
    static let image = LegacyFixture.firmware(1000)
    static let initPacket = LegacyInitPacket(
        layout: .v05, deviceType: 0xFFFF, deviceRevision: 0xFFFF, applicationVersion: 2, softdeviceReq: [0xFFFE], image: image
    ).encode()

    struct Watch {
        var dfu = InfiniTimeDFU(profile: InfiniTimeConversationTests.profile)
        var now: Duration = .zero
        var rebooted = false
        var waited: Duration = .zero
        var attErrors: [ATTErrorCode] = []

        mutating func collect(_ actions: [LegacyBootloaderAction]) -> [[UInt8]] {
            actions.compactMap { action in
                switch action {
                case .notify(let bytes): return bytes
                case .reboot: rebooted = true
                case .wait(let d):
                    waited += d
                    now += d
                case .attError(let code): attErrors.append(code)
                default: break
                }
                return nil
            }
        }
        mutating func cp(_ bytes: [UInt8]) -> [[UInt8]] { collect(dfu.handle(.controlPointWrite(bytes, cccdEnabled: true), at: now)) }
        mutating func packet(_ bytes: [UInt8]) -> [[UInt8]] { collect(dfu.handle(.packetWrite(bytes, withResponse: false), at: now)) }
        mutating func advance(_ d: Duration) -> [[UInt8]] {
            now += d
            return collect(dfu.handle(.tick, at: now))
        }
    }

    @Test func wholeUpdate() {
        var w = Watch()
        #expect(w.cp([0x01, 0x01]).isEmpty)  // a SoftDevice: ignored, no answer
        #expect(w.dfu.state == .idle)
        #expect(w.cp([0x01, 0x04]).isEmpty)
        #expect(w.packet(LegacyStartSizes(application: 1000).encoded) == [answer(0x01, 0x01)])
        #expect(w.waited >= .seconds(4))  // 116 sectors of SPI NOR, synchronously
        #expect(w.cp([0x02, 0x00]).isEmpty)
        #expect(w.packet(Self.initPacket).isEmpty)
        #expect(w.cp([0x02, 0x01]).isEmpty)  // answered ≈ 1 s later
        #expect(w.advance(.milliseconds(990)) == [answer(0x02, 0x01)])
        #expect(w.cp([0x08, 0x0A, 0x00]).isEmpty)
        #expect(w.cp([0x03]).isEmpty)
        var answers: [[UInt8]] = []
        for offset in stride(from: 0, to: 1000, by: 20) { answers += w.packet(Array(Self.image[offset..<offset + 20])) }
        // A receipt after 10, 20, 30, 40 packets (not after the 50th, the last) and then 10 03 01.
        #expect(answers.count == 5)
        #expect(answers.first == [0x11, 0xC8, 0x00, 0x00, 0x00])
        #expect(answers.last == answer(0x03, 0x01))
        #expect(w.cp([0x07]).isEmpty)  // not implemented
        #expect(w.cp([0x04]).isEmpty)
        #expect(w.advance(.seconds(1)) == [answer(0x04, 0x01)])
        #expect(w.cp([0x05]).isEmpty)
        #expect(w.rebooted)
        #expect(w.dfu.installed.application?.sha256 == LegacyFixture.sha(Self.image))
    }

    /// A write longer than 20 bytes trips `ASSERT(size <= 20)`: the watch resets with its old firmware.
    @Test func longWriteResetsTheWatch() {
        var w = Watch()
        _ = w.cp([0x01, 0x04])
        _ = w.packet(LegacyStartSizes(application: 1000).encoded)
        _ = w.packet(Self.initPacket)
        _ = w.cp([0x03])
        #expect(w.packet([UInt8](repeating: 0, count: 244)).isEmpty)
        #expect(w.rebooted)
        #expect(w.dfu.state == .idle)
        #expect(w.dfu.installed.application?.sha256 == "")
    }

    @Test func badCRCResetsTheService() {
        var w = Watch()
        _ = w.cp([0x01, 0x04])
        _ = w.packet(LegacyStartSizes(application: 1000).encoded)
        _ = w.packet(Self.initPacket)
        _ = w.cp([0x03])
        var wrong = Self.image
        wrong[0] ^= 1
        for offset in stride(from: 0, to: 1000, by: 20) { _ = w.packet(Array(wrong[offset..<offset + 20])) }
        _ = w.cp([0x04])
        #expect(w.advance(.seconds(1)) == [answer(0x04, 0x05)])
        #expect(w.dfu.state == .idle)
    }

    /// Any DFU access while updating restarts the 10 000-tick timer; its expiry resets the service (not the watch).
    @Test func timeoutResetsTheService() {
        var w = Watch()
        _ = w.cp([0x01, 0x04])
        _ = w.packet(LegacyStartSizes(application: 1000).encoded)
        #expect(w.dfu.state == .initialize)
        // The timer restarted when the sizes arrived, before the 5-second erase.
        _ = w.advance(.seconds(4))
        #expect(w.dfu.state == .initialize)
        _ = w.advance(.seconds(1))
        #expect(w.dfu.state == .idle)
        #expect(!w.rebooted)
    }

    @Test func disabledInSettings() {
        var profile = Self.profile
        profile.dfuEnabled = false
        var w = Watch()
        w.dfu = InfiniTimeDFU(profile: profile)
        #expect(w.cp([0x01, 0x04]).isEmpty)
        #expect(w.attErrors == [.insufficientAuthorization])
    }
}
