import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// The engine against the pure virtual bootloaders: every profile kind, every pacing mode.
@Suite(.timeLimit(.minutes(5))) struct EngineLoopTests {
    static let profiles: [(String, LegacyDeviceProfile)] = [
        ("sdk11-nrf51", .sdk11NRF51(address: LegacyFixture.address)),
        ("sdk11-nrf52", .sdk11NRF52(address: LegacyFixture.address)),
        ("adafruit-nrf52832", .adafruitNRF52832(address: LegacyFixture.address)),
        ("adafruit-nrf52840", .adafruitNRF52840(address: LegacyFixture.address)),
    ]

    @Test(arguments: ["adaptive", "prn:10", "ios", "android", "nrfutil", "stream", "prn:1"])
    func applicationOnEveryBootloader(pacing: String) throws {
        let image = LegacyFixture.firmware(10_000)
        for (name, profile) in Self.profiles {
            let deviceType: UInt16 = profile.kind == .adafruit ? 0x0052 : 0xFFFF
            let part = LegacyFixture.application(image, deviceType: deviceType)
            var loop = LegacyLoop(
                part: part, device: LegacyBootloader(profile: LegacyFixture.instant(profile)),
                configuration: LegacyDFUConfiguration(pacing: try LegacyPacingPolicies.parse(pacing)))
            loop.device.boot(at: .zero)
            loop.run()
            let succeeded = loop.succeeded
            #expect(succeeded, "\(name) \(pacing): \(String(describing: loop.failure))")
            #expect(loop.rebootedInto == .application, "\(name)")
            #expect(loop.device.installed.application?.sha256 == LegacyFixture.sha(image), "\(name) \(pacing)")
            #expect(loop.device.counters.packetsRefused == 0)
        }
    }

    /// The request script of a clean transfer with PRN 10 (nrfutil 0.5.3's order: PRN after the init packet).
    @Test func requestScript() throws {
        let image = LegacyFixture.firmware(1000)
        let part = LegacyFixture.application(image)
        var loop = LegacyLoop(
            part: part, device: LegacyBootloader(profile: LegacyFixture.instant(.sdk11NRF51(address: LegacyFixture.address))),
            configuration: LegacyDFUConfiguration(pacing: LegacyReceiptPacing(interval: 10)))
        loop.device.boot(at: .zero)
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded)
        #expect(
            loop.requests == [
                .startDFU(.application), .initialize(.receive), .initialize(.complete), .packetReceiptRequest(10),
                .receiveFirmwareImage, .reportReceivedImageSize, .validate, .activateAndReset,
            ])
        // 1 sizes packet + 1 init packet (14 bytes) + 50 data packets of 20 bytes.
        #expect(loop.packetWrites == 52)
        #expect(loop.device.counters.prnsSent == 4)  // after 10, 20, 30, 40 packets; none for the last one
    }

    @Test func sdk6BootloaderTakesATwoByteCRC() throws {
        let image = LegacyFixture.firmware(4000)
        let crc = CRC16.ccittFalse(image)
        let part = LegacyPart.application(image, initPacket: [UInt8(crc & 0xFF), UInt8(crc >> 8)], layout: .crcOnly)
        var loop = LegacyLoop(
            part: part, device: LegacyBootloader(profile: LegacyFixture.instant(.sdk6NRF51(address: LegacyFixture.address))),
            configuration: LegacyDFUConfiguration(deviceVersion: nil))
        loop.device.boot(at: .zero)
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        #expect(loop.requests.prefix(2) == [.startDFU(.application), .initializeWithoutStep])
        #expect(loop.device.installed.application?.sha256 == LegacyFixture.sha(image))
    }

    /// SDK 6.0 answers the 12-byte sizes with `10 01 03`; the engine falls back to `01` + the application size.
    @Test func sdk60FallsBackToStartWithoutType() throws {
        var profile = LegacyFixture.instant(.sdk6NRF51(address: LegacyFixture.address))
        profile.sdkVersion = "6.0.0"
        let image = LegacyFixture.firmware(2000)
        let crc = CRC16.ccittFalse(image)
        let part = LegacyPart.application(image, initPacket: [UInt8(crc & 0xFF), UInt8(crc >> 8)], layout: .crcOnly)
        var loop = LegacyLoop(part: part, device: LegacyBootloader(profile: profile), configuration: LegacyDFUConfiguration(deviceVersion: nil))
        loop.device.boot(at: .zero)
        loop.run()
        let succeeded = loop.succeeded
        #expect(succeeded, "\(String(describing: loop.failure))")
        #expect(loop.requests.prefix(3) == [.startDFU(.application), .startDFUWithoutType, .initializeWithoutStep])
    }
}
