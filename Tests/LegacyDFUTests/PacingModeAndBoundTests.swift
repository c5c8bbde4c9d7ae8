import DFUSimulator
import LegacyDFU
import Testing

/// The `--mode` names: what each emulation asks the device for, what the parser refuses, and the Legacy protocol
/// bound that `bledfu bench` measures the modes against.
@Suite(.timeLimit(.minutes(2))) struct PacingModeAndBoundTests {
    static let image = LegacyFixture.firmware(12_000, seed: 3)

    static func run(_ mode: String, profile: LegacyDeviceProfile) throws -> LegacyLoop {
        var configuration = LegacyDFUConfiguration()
        configuration.pacing = try LegacyPacingPolicies.parse(mode)
        var attempts = LegacyAttempts(device: LegacyBootloader(profile: profile), configuration: configuration)
        return attempts.run(LegacyFixture.application(Self.image))
    }

    /// Packet Receipt Notification Request (`08 <u16>`): iOS 12, nrfutil 10, prn:N N; Android and stream none
    /// (flow control only); every mode installs the image.
    @Test(arguments: [("ios", [0x08, 0x0C, 0x00] as [UInt8]?), ("nrfutil", [0x08, 0x0A, 0x00]), ("prn:7", [0x08, 0x07, 0x00]),
        ("android", nil), ("stream", nil)])
    func receiptRequests(mode: String, request: [UInt8]?) throws {
        let loop = try Self.run(mode, profile: LegacyFixture.instant(.sdk11NRF51(address: LegacyFixture.address)))
        #expect(loop.succeeded, "\(mode): \(String(describing: loop.failure))")
        let receipts = loop.requests.map(\.encoded).filter { $0.first == 0x08 && $0 != [0x08, 0x00, 0x00] }
        if let request {
            #expect(receipts == [request], "\(mode): \(receipts)")
        } else {
            #expect(receipts.isEmpty, "\(mode): \(receipts)")
        }
        #expect(loop.device.installed.application?.sha256 == LegacyFixture.sha(Self.image))
    }

    @Test(arguments: ["", "fast", "prn", "prn:0", "prn:256", "prn:x", "ios:2", "adaptive:1"])
    func unknownModesAreRefused(text: String) {
        #expect(throws: LegacyPacingPolicies.ParseError.self) { try LegacyPacingPolicies.parse(text) }
        do {
            _ = try LegacyPacingPolicies.parse(text)
        } catch {
            #expect(error.description.contains("unknown Legacy pacing '\(text)'"))
        }
    }

    /// The bound is a bound: no mode, on simulated time with each profile's link and flash model (speedup 1: the
    /// loop jumps from event to event, nothing waits), carries the image faster than it; and it is below the link's
    /// bare Write Command rate (the erase and the round trips cost time).
    @Test(arguments: ["sdk11-nrf51", "sdk11-nrf52", "adafruit-feather52832"])
    func noModeBeatsTheBound(profileName: String) throws {
        var profile: LegacyDeviceProfile =
            switch profileName {
            case "sdk11-nrf51": .sdk11NRF51(address: LegacyFixture.address)
            case "sdk11-nrf52": .sdk11NRF52(address: LegacyFixture.address)
            default: .adafruitNRF52832(address: LegacyFixture.address)
            }
        profile.speedup = 1
        let bound = profile.protocolBound(imageSize: Self.image.count)
        let link = LinkModel(link: profile.link, flash: profile.flash)
        let bare = 20 * 1_000_000 / link.writeCommandMicros(attBytes: 23)
        #expect(bound.bytesPerSecond > 0 && bound.bytesPerSecond < bare, "\(bound.bytesPerSecond) vs \(bare)")
        for mode in ["adaptive", "stream", "ios", "android", "nrfutil", "prn:1"] {
            let loop = try Self.run(mode, profile: profile)
            guard loop.succeeded else {
                // A mode that loses packets restarts; the time of every attempt counts, so it only gets slower.
                continue
            }
            let seconds = Double(loop.now.components.seconds) + Double(loop.now.components.attoseconds) / 1e18
            let achieved = Double(Self.image.count) / seconds
            #expect(achieved <= bound.bytesPerSecond * 1.001, "\(profileName) \(mode): \(Int(achieved)) B/s above the bound \(Int(bound.bytesPerSecond))")
        }
    }
}
