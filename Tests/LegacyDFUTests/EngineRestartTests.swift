import BLECore
import DFUPackage
import DFUSimulator
import LegacyDFU
import Testing

/// Restarts from zero, losses, refusals and lying devices: each ends with the image checked on the device, or with
/// one clear error and nothing reported installed.
@Suite(.timeLimit(.minutes(5))) struct EngineRestartTests {
    static let nrf52 = LegacyFixture.instant(.sdk11NRF52(address: LegacyFixture.address))
    static let image = LegacyFixture.firmware(12_000, seed: 3)

    /// A flash four times slower than the link: streaming (`android`) overruns the 8 RX buffers, the device refuses a
    /// packet (10 03 06), the engine resets it and the image starts again with receipts; it ends installed.
    @Test func lostPacketsRestartWithSlowerPacing() {
        var profile = LegacyDeviceProfile.sdk11NRF52(address: LegacyFixture.address)
        profile.flash.wordWriteMicros = 1500  // 7.5 ms per 20-byte packet; the link carries one every 5 ms
        profile.flash.pageEraseMicros = 1
        var run = LegacyAttempts(
            device: LegacyBootloader(profile: profile),
            configuration: LegacyDFUConfiguration(pacing: try! LegacyPacingPolicies.parse("android")))
        run.run(LegacyFixture.application(Self.image))
        #expect(run.outcome == nil, "\(String(describing: run.outcome))")
        #expect(run.attempts.count == 2)
        #expect(run.attempts.first?.failure?.code == .bytesLost)
        #expect(run.attempts.first?.requests.last == .reset)
        #expect(run.journal.restarts.count == 1 && run.journal.bytesResent > 0)
        #expect(run.journal.summary?.contains("packets lost ×1") == true)
        #expect(run.device.installed.application?.sha256 == LegacyFixture.sha(Self.image))
    }

    /// The adaptive policy learns the longest window the slow device takes: after a loss its ceiling is half the
    /// window that lost packets, and the next attempt completes.
    @Test func adaptiveLearnsTheWindow() {
        var profile = LegacyDeviceProfile.sdk11NRF52(address: LegacyFixture.address)
        profile.flash.wordWriteMicros = 1500  // 7.5 ms per 20-byte packet; the link carries one every 5 ms
        profile.flash.pageEraseMicros = 1
        var run = LegacyAttempts(device: LegacyBootloader(profile: profile))
        run.run(LegacyFixture.application(Self.image))
        #expect(run.outcome == nil, "\(String(describing: run.outcome))")
        let learned = run.configuration.pacing as? LegacyAdaptivePacing
        #expect((learned?.lostAttempts ?? 0) >= 1)
        #expect((learned?.ceiling ?? 1024) < 1024)
        #expect(run.device.installed.application?.sha256 == LegacyFixture.sha(Self.image))
    }

    /// A link lost mid-image at several byte counts: the next connection finds the bootloader still busy
    /// (Start → 10 01 02), resets it (06) and sends the image again from zero; it ends installed.
    @Test(arguments: [1, 400, 4_000, 11_980])
    func disconnectThenBusyThenRestart(afterBytes: Int) throws {
        let faults = try FaultPlan(parsing: "disconnect-after-bytes=\(afterBytes)")
        var run = LegacyAttempts(device: LegacyBootloader(profile: Self.nrf52, faults: faults))
        run.run(LegacyFixture.application(Self.image))
        #expect(run.outcome == nil, "\(String(describing: run.outcome))")
        #expect(run.attempts.map { $0.failure?.code } == [.disconnected, .deviceReset, nil])
        #expect(run.attempts[1].requests == [.startDFU(.application), .reset])
        #expect(run.journal.summary?.contains("link lost ×1") == true)
        #expect(run.device.installed.application?.sha256 == LegacyFixture.sha(Self.image))
    }

    /// A 0.7 init packet on the SDK 11 CRC template: Validate fails every time; after two failed validations the
    /// update gives up with the reason, and the old application is still there.
    @Test func validationFailureGivesUpWithAHint() {
        var run = LegacyAttempts(device: LegacyBootloader(profile: Self.nrf52))
        run.run(LegacyFixture.application(Self.image, layout: .v07))
        #expect(run.outcome?.code == .gaveUp)
        #expect(run.outcome?.reason.contains("CRC error (0x05)") == true)
        #expect(run.outcome?.reason.contains("--dfu-ver 0.5") == true)
        #expect(run.attempts.count == 2)
        #expect(run.device.installed.application?.sha256 == "")
    }

    @Test func imageLargerThanTheBank() {
        var loop = LegacyLoop(part: LegacyFixture.application(LegacyFixture.firmware(0x2F004)), device: LegacyBootloader(profile: Self.nrf52))
        loop.device.boot(at: .zero)
        loop.run()
        #expect(loop.failure?.code == .remote)
        #expect(loop.failure?.status == .dataSizeExceedsLimit)
        #expect(
            loop.failure?.reason
                == "Start DFU (0x01) refused: data size exceeds limit (0x04): the application image of 192516 bytes (SoftDevice 0, bootloader 0, application 192516) is larger than the device's bank or bootloader area")
    }

    /// A package for another device type: Adafruit's bootloader refuses Nordic's default device type 0xFFFF, at
    /// Initialize DFU Parameters, after Start erased its single bank. The engine told nothing of the device (no
    /// ``LegacyDFUConfiguration/requiredDeviceType``) loses the application: what the check before Start prevents.
    @Test func packageForAnotherDeviceType() {
        let adafruit = LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address))
        var loop = LegacyLoop(part: LegacyFixture.application(Self.image), device: LegacyBootloader(profile: adafruit))
        loop.device.boot(at: .zero)
        loop.run()
        #expect(loop.failure?.code == .remote)
        #expect(loop.failure?.status == .operationFailed)
        #expect(loop.failure?.reason.contains("device type 0xFFFF, revision 0xFFFF, SoftDevice [0xFFFE]") == true)
        // Single bank: Start erased the application; the device stays in its bootloader (Adafruit_nRF52_Bootloader #399).
        #expect(loop.device.installed.application == nil)
        #expect(loop.device.bootTarget == .bootloader)
    }

    /// Told the device is Adafruit's (device type 0x0052 required), the engine refuses another device type, or an
    /// init packet without one, before Start DFU: nothing is written, bank 0 keeps the application. 0x0052 goes on.
    @Test(arguments: [LegacyInitPacket.Layout.v05, .v07])
    func requiredDeviceTypeIsCheckedBeforeStart(layout: LegacyInitPacket.Layout) {
        let adafruit = LegacyFixture.instant(.adafruitNRF52832(address: LegacyFixture.address))
        var configuration = LegacyDFUConfiguration()
        configuration.requiredDeviceType = 0x0052
        for type: UInt16 in [0xFFFF, 0x0051, 0x5200] {
            var loop = LegacyLoop(
                part: LegacyFixture.application(Self.image, layout: layout, deviceType: type), device: LegacyBootloader(profile: adafruit),
                configuration: configuration)
            loop.device.boot(at: .zero)
            loop.run()
            #expect(loop.failure?.code == .incompatible, "\(String(describing: loop.failure))")
            #expect(loop.failure?.reason.contains("the Adafruit nRF52 bootloader takes device type 0x0052 only") == true)
            #expect(loop.requests.isEmpty, "\(loop.requests)")
            #expect(loop.device.installed.application?.version == 1 && loop.device.bank0 == .validApp)
        }
        var loop = LegacyLoop(
            part: LegacyFixture.application(Self.image, layout: .v05, deviceType: 0x0052), device: LegacyBootloader(profile: adafruit),
            configuration: configuration)
        loop.device.boot(at: .zero)
        loop.run()
        #expect(loop.failure == nil, "\(String(describing: loop.failure))")
        #expect(loop.device.installed.application?.sha256 == LegacyFixture.sha(Self.image))
    }

    /// A Secure package is refused before anything is sent.
    @Test func securePackageIsRefused() throws {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: LegacyFixture.firmware(4000))
        builder.applicationVersion = 1
        builder.hwVersion = 52
        builder.sdReq = [0xB7]
        let package = try FirmwarePackage(bytes: try builder.archive())
        #expect(throws: LegacyDFUError(.incompatible, "")) { try LegacyPart.parts(of: package) }
        do {
            _ = try LegacyPart.parts(of: package)
        } catch {
            #expect(error.reason.contains("Secure DFU package") && error.reason.contains("--dfu-ver"))
        }
    }

    // MARK: Lying devices

    static func lyingRun(_ lie: @escaping ([UInt8]) -> [[UInt8]]) -> LegacyLoop {
        var loop = LegacyLoop(
            part: LegacyFixture.application(Self.image), device: LegacyBootloader(profile: Self.nrf52),
            configuration: LegacyDFUConfiguration(pacing: LegacyReceiptPacing(interval: 10)))
        loop.lie = lie
        loop.device.boot(at: .zero)
        loop.run()
        return loop
    }

    /// A device that reports 20 bytes fewer than it received in Report Received Image Size (`10 07 01 <u32>`).
    @Test func wrongReceivedSize() {
        let loop = Self.lyingRun { bytes in
            guard bytes.count == 7, bytes[0] == 0x10, bytes[1] == 0x07 else { return [bytes] }
            return [LegacyNotification.receivedImageSize(UInt32(Self.image.count - 20)).encoded]
        }
        #expect(loop.failure?.code == .protocolViolation)
        #expect(loop.failure?.reason.contains("reports 11980 of 12000 bytes received") == true)
        #expect(!loop.requests.contains(.validate))
    }

    /// A device that reports 20 bytes more than were sent in Report Received Image Size: a protocol violation,
    /// never Validate.
    @Test func receivedSizeBeyondWhatWasSent() {
        let loop = Self.lyingRun { bytes in
            guard bytes.count == 7, bytes[0] == 0x10, bytes[1] == 0x07 else { return [bytes] }
            return [LegacyNotification.receivedImageSize(UInt32(Self.image.count + 20)).encoded]
        }
        #expect(loop.failure?.code == .protocolViolation)
        #expect(loop.failure?.reason.contains("reports 12020 bytes received but only 12000 were sent") == true, "\(String(describing: loop.failure))")
        #expect(!loop.requests.contains(.validate))
    }

    /// A device whose receipts count more bytes than were sent.
    @Test func receiptBeyondWhatWasSent() {
        let loop = Self.lyingRun { bytes in
            guard bytes.first == 0x11 else { return [bytes] }
            return [LegacyNotification.packetReceipt(bytesReceived: 1_000_000).encoded]
        }
        #expect(loop.failure?.code == .protocolViolation)
        #expect(loop.failure?.reason.contains("reports 1000000 bytes received but only") == true)
    }

    /// A device that reports the image complete (10 03 01) and valid (10 04 01) after the first receipt.
    @Test func earlyCompletionAndValidation() {
        let loop = Self.lyingRun { bytes in
            guard bytes.first == 0x11 else { return [bytes] }
            return [bytes, [0x10, 0x03, 0x01], [0x10, 0x04, 0x01]]
        }
        #expect(loop.failure?.code == .protocolViolation)
        #expect(loop.failure?.reason.contains("reports the image complete after") == true)
        #expect(!loop.requests.contains(.activateAndReset))
        #expect(loop.device.installed.application?.sha256 == "")
    }

    /// A device that answers Validate success before it was asked (while the last answer is awaited).
    @Test func unsolicitedValidateSuccess() {
        let loop = Self.lyingRun { bytes in
            guard bytes == [0x10, 0x03, 0x01] else { return [bytes] }
            return [[0x10, 0x04, 0x01]]
        }
        #expect(loop.failure?.code == .protocolViolation)
        #expect(loop.failure?.reason.contains("unexpected Response to Validate (0x04): success (0x01)") == true)
        #expect(!loop.requests.contains(.activateAndReset))
    }

    /// A silent device (no answer to Start) ends with a timeout, not a hang.
    @Test func silentDevice() throws {
        let faults = try FaultPlan(parsing: "stall-at=start")
        var loop = LegacyLoop(part: LegacyFixture.application(Self.image), device: LegacyBootloader(profile: Self.nrf52, faults: faults))
        loop.device.boot(at: .zero)
        loop.run()
        #expect(loop.failure?.code == .timeout)
        #expect(loop.failure?.reason.contains("Start DFU") == true)
    }
}
