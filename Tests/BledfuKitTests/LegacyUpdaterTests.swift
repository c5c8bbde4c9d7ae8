import BLECore
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUSimulator
import Foundation
import GATT
import LegacyDFU
import Testing

@testable import BledfuKit

/// Legacy packages and devices for the updater: SDK 11 nRF51 (S130 2.0.0, FWID 0x80), instant flash.
enum LegacyKitFixture {
    static let address = BluetoothAddress("E1:5D:11:51:00:01")!
    static let image = (0..<8_000).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) }

    static func profile(_ make: (BluetoothAddress) -> LegacyDeviceProfile = LegacyDeviceProfile.sdk11NRF51) -> LegacyDeviceProfile {
        var profile = make(address)
        profile.speedup = .infinity
        return profile
    }

    static func package(deviceType: UInt16 = 0xFFFF, layout: LegacyInitPacket.Layout = .v05, image: [UInt8] = image) throws
        -> PackageSource
    {
        SyntheticPackage.source(
            try SyntheticPackage.legacyApplication(image, layout: layout, deviceType: deviceType), fileName: "legacy-app.zip")
    }

    static func request(_ package: PackageSource, family: DFUFamilyID? = nil) -> UpdateRequest {
        var request = UpdateRequest(
            package: package, target: .address(PeerAddress(address, type: .random)),
            options: UpdateOptions(pacing: "adaptive", rebootDelay: .zero), reconnect: ReconnectPolicy(initialDelay: .zero))
        request.family = family
        return request
    }
}

@Suite(.timeLimit(.minutes(10))) struct LegacyUpdaterTests {
    /// Detection from the services and DFU Version (0.1: application), the legacy buttonless jump, the bootloader
    /// at the same address (peer data), the image, activation: the updater with its default families.
    @Test func applicationJumpAndImage() async throws {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        let adapter = VirtualDeviceAdapter(devices: [device])
        let updater = Updater(adapter: adapter, clock: ContinuousClock())
        let run = updater.start(LegacyKitFixture.request(try LegacyKitFixture.package()))
        var events: [UpdateEvent] = []
        for await event in run { events.append(event) }
        let result = try await run.result()
        #expect(result.family == .legacy)
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
        #expect(state.mode == .application)
        #expect(events.contains(.applicationMode(address: LegacyKitFixture.address.description, bonded: false)))
        #expect(events.contains(.updaterReady(family: .legacy, address: LegacyKitFixture.address.description)))
    }

    /// A link lost in the middle of the image: the next connection finds the bootloader busy, resets it (the dual-bank
    /// device comes back as its old application), jumps again and sends the image from zero; the statistics count
    /// the bytes sent again, a warning says why.
    @Test func lostLinkRestartsFromZero() async throws {
        let device = VirtualLegacyDevice(
            profile: LegacyKitFixture.profile(), faults: try FaultPlan(parsing: "disconnect-after-bytes=3000"),
            clock: ContinuousClock())
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let run = updater.start(LegacyKitFixture.request(try LegacyKitFixture.package()))
        var warnings: [String] = []
        for await event in run { if case .warning(let text) = event { warnings.append(text) } }
        let result = try await run.result()
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
        #expect(result.statistics.bytesResent >= 3000)
        #expect(warnings.contains { $0.contains("link lost") && $0.contains("will be sent again") })
        #expect(warnings.contains { $0.contains("busy with an earlier transfer") })
        // Dual bank: the reset brought the old application back (the jump found the bootloader at its address).
        #expect(!warnings.contains { $0.contains("lost its application") }, "\(warnings)")
        // The result says why bytes were sent again.
        let summary = try #require(result.summary)
        #expect(summary.contains("link lost ×1") && summary.contains("device busy with an earlier transfer ×1"), "\(summary)")
    }

    /// Single bank (Adafruit): the same loss leaves the device without its application (Start erased bank 0); after
    /// the reset it stays in its bootloader at address + 1, and the updater says so in a warning before it sends the
    /// image again; the result's summary says why bytes were sent again.
    @Test func singleBankLostApplicationIsReported() async throws {
        let device = VirtualLegacyDevice(
            profile: LegacyKitFixture.profile(LegacyDeviceProfile.adafruitNRF52832),
            faults: try FaultPlan(parsing: "disconnect-after-bytes=3000"), clock: ContinuousClock())
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        // Adafruit bootloaders take device type 0x0052 only (legacy-dfu.md §5.4).
        let run = updater.start(LegacyKitFixture.request(try LegacyKitFixture.package(deviceType: 0x0052)))
        var warnings: [String] = []
        for await event in run { if case .warning(let text) = event { warnings.append(text) } }
        let result = try await run.result()
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
        let lost = warnings.filter { $0.contains("the device lost its application") }
        #expect(lost.count == 1, "\(warnings)")
        #expect(lost.first?.contains(LegacyKitFixture.address.nordicBootloaderAddress.description) == true, "\(lost)")
        let summary = try #require(result.summary)
        #expect(summary.hasPrefix("application: restarted 2 times"), "\(summary)")
        #expect(summary.contains("link lost ×1") && summary.contains("device busy with an earlier transfer ×1"), "\(summary)")
    }

    /// A killed update (the run cancelled once the device confirmed 8 KiB, without the abort reset: the device
    /// keeps the old attempt), then a new updater over the same journal directory (a new process): it reads the
    /// killed run's own journal (an open attempt with the bytes it had sent), finds the bootloader busy, resets
    /// it, sends the image from zero and ends with the image's hash on the device; the summary says why.
    @Test func killThenRerun() async throws {
        let image = (0..<120_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ ($0 >> 9)) }
        var profile = LegacyKitFixture.profile(LegacyDeviceProfile.sdk11NRF52)
        profile.speedup = 10  // the image takes seconds, so the kill lands inside it
        profile.inactivityTimeoutSeconds = 36_000  // the bootloader still holds the old attempt when the rerun comes
        let device = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        let adapter = VirtualDeviceAdapter(devices: [device])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-legacy-kill-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        func store() -> JournalFileStore {
            JournalFileStore(directory: directory, packagePath: "/nonexistent/app.zip", adapter: "virtual", addressType: "random")
        }
        let package = try LegacyKitFixture.package(image: image)
        let first = Updater(adapter: adapter, clock: ContinuousClock(), journal: store()).start(LegacyKitFixture.request(package))
        var killedAt: Int?
        for await event in first {
            if case .progress(let progress) = event, progress.bytes >= LegacyDFUFamily.attemptCheckpointBytes, killedAt == nil {
                killedAt = progress.bytes
                first.cancel()
            }
        }
        await #expect(throws: DFUError.self) { try await first.result() }
        let held = await device.state()
        #expect(held.mode == .bootloader && held.transfer.bytesAccepted < UInt32(image.count), "\(held.transfer)")
        // The killed run's own journal: an open attempt, with at least the 8 KiB checkpoint in it.
        let saved = try #require(try await store().load(deviceAddress: LegacyKitFixture.address.description, packageSHA256: package.sha256))
        let legacy = try #require(try saved.resume?.decode(LegacyJournal.self))
        #expect(legacy.openAttempt && legacy.attemptBytes >= LegacyDFUFamily.attemptCheckpointBytes, "\(legacy)")

        let rerun = Updater(adapter: adapter, clock: ContinuousClock(), journal: store()).start(LegacyKitFixture.request(package))
        var warnings: [String] = []
        for await event in rerun { if case .warning(let text) = event { warnings.append(text) } }
        let result = try await rerun.result()
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(image))
        #expect(warnings.contains { $0.contains("busy with an earlier transfer") }, "\(warnings)")
        #expect(result.statistics.bytesResent >= legacy.attemptBytes)
        let summary = try #require(result.summary)
        #expect(summary.contains("tool stopped ×1") && summary.contains("device busy with an earlier transfer ×1"), "\(summary)")
        // Done: the journal is gone.
        #expect(try await store().load(deviceAddress: LegacyKitFixture.address.description, packageSHA256: package.sha256) == nil)
    }

    /// A package signed by `package create --key-file` (dfu_version 0.8) through the updater onto an SDK 11 device
    /// built with the signing template: installed when the device holds the package's key; with another key the
    /// device refuses the init packet (`10 02 06`), the update fails with one line and the old application stays.
    @Test func signedPackageOnTheSigningTemplate() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let pem = try PackageKeys.readPEM(root.appendingPathComponent("Firmware/keys/test-signing-key-DO-NOT-USE.pem"))
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: LegacyKitFixture.image)
        builder.applicationVersion = 2
        builder.legacy = LegacyOptions()
        builder.signingKey = try PackageKeys.privateKey(pem: pem)
        let bytes = try builder.archive()
        let package = SyntheticPackage.source(bytes, fileName: "signed.zip")
        // X ‖ Y of Firmware/keys/test-signing-key-DO-NOT-USE.pub.pem, big-endian.
        let key = "15c440deed1c9611a94a2646bb94da73b3acee3fc1dd93b91682ad7543c3ba79"
            + "46670db2dbbce0ff6c67549be4a0c195e1f1767f20ac517dd65fbc39de3f09d8"

        let holdsKey = VirtualLegacyDevice(
            profile: LegacyKitFixture.profile { .sdk11NRF51Signed(address: $0, key: key) }, clock: ContinuousClock())
        _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [holdsKey]), clock: ContinuousClock())
            .update(LegacyKitFixture.request(package))
        let installed = await holdsKey.state().installed.application
        #expect(installed?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
        #expect(installed?.version == 2)

        let otherKey = VirtualLegacyDevice(
            profile: LegacyKitFixture.profile { .sdk11NRF51Signed(address: $0, key: LegacyDeviceProfile.sdk11SigningTemplateKey) },
            clock: ContinuousClock())
        do {
            _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [otherKey]), clock: ContinuousClock())
                .update(LegacyKitFixture.request(package))
            Issue.record("a device holding another key took the package")
        } catch {
            #expect(error.message.contains("operation failed"), "\(error.message)")
        }
        let kept = await otherKey.state().installed.application
        #expect(kept?.version == 1 && kept?.sha256 != DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
    }

    /// A package made by `package create` with a SoftDevice, a bootloader and an application (two Legacy parts:
    /// `sd_bl.bin`, then the application): through the updater, SD+BL first in its own bootloader session (the
    /// device stays in its bootloader without an application), then the application; each image's hash on the
    /// device and the new SoftDevice's FWID read from its information structure.
    @Test func softDeviceBootloaderThenApplication() async throws {
        // A SoftDevice with its information structure at 0x2000 (magic 0x51B1E5DB, end 0x1B000, FWID 0x87).
        var softdevice = (0..<0x3000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        let info: [UInt8] = [0xDB, 0xE5, 0xB1, 0x51, 0x00, 0xB0, 0x01, 0x00, 0x87, 0x00]
        softdevice.replaceSubrange(0x2004..<0x200E, with: info)
        let bootloader = (0..<0x2000).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 5) }
        var builder = PackageBuilder()
        builder.softdevice = PackageBuilder.Image(stem: "s130", bytes: softdevice)
        builder.bootloader = PackageBuilder.Image(stem: "bootloader", bytes: bootloader)
        builder.application = PackageBuilder.Image(stem: "app", bytes: LegacyKitFixture.image)
        builder.applicationVersion = 2
        builder.legacy = LegacyOptions()
        let bytes = try builder.archive()
        let package = SyntheticPackage.source(bytes, fileName: "sd-bl-app.zip")
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        let run = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .start(LegacyKitFixture.request(package))
        var completed: [String] = []
        for await event in run { if case .partCompleted(_, let name) = event { completed.append(name) } }
        let result = try await run.result()
        #expect(completed.count == 2 && completed.last == "application", "\(completed)")
        #expect(result.statistics.bytesResent == 0)
        let state = await device.state()
        #expect(state.installed.softdevice?.sha256 == DFUSimulatorDigest.sha256Hex(softdevice))
        #expect(state.installed.bootloader.sha256 == DFUSimulatorDigest.sha256Hex(bootloader))
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
        #expect(state.softdeviceFWID == 0x87)
        #expect(state.mode == .application)
    }

    /// A Secure package on a Legacy device, and a Legacy package on a Secure device: one line each, nothing sent.
    @Test func packageOfTheOtherFamily() async throws {
        let legacyDevice = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: LegacyKitFixture.image)
        builder.applicationVersion = 2
        builder.hwVersion = 52
        builder.sdReq = [0x80]
        let secureBytes = try builder.archive()
        let secure = SyntheticPackage.source(secureBytes, fileName: "secure.zip")
        do {
            _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [legacyDevice]), clock: ContinuousClock())
                .update(LegacyKitFixture.request(secure))
            Issue.record("a Secure package went onto a Legacy device")
        } catch {
            #expect(error.code == .incompatiblePackage, "\(error)")
            #expect(error.message.contains("is a Secure DFU package"), "\(error.message)")
        }
        #expect(await legacyDevice.state().counters.packetsReceived == 0)

        let secureProfile = DeviceProfile(
            name: "Bracelet", address: LegacyKitFixture.address, hwVersion: 52, softDeviceFWID: 0xB7, requireSignedApp: false,
            speedup: .infinity)
        let secureDevice = VirtualDevice(profile: secureProfile, clock: ContinuousClock())
        let legacy = try LegacyKitFixture.package()
        do {
            _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [secureDevice]), clock: ContinuousClock())
                .update(LegacyKitFixture.request(legacy))
            Issue.record("a Legacy package went onto a Secure device")
        } catch {
            #expect(error.code == .incompatiblePackage, "\(error)")
            #expect(error.message.contains("is a Legacy DFU package"), "\(error.message)")
        }
    }

    /// The device refuses the package itself: an init packet for another device type (Adafruit takes 0x0052 only:
    /// refused before the jump from its manufacturer, `device-mismatch`, exit 48; NeverStrandTests has the SDK 11
    /// case, refused with `10 02 06`) and an image larger than the bank (`10 01 04`): incompatible-package (exit 46),
    /// one line naming the status, the old application kept, no restart.
    @Test func deviceRefusesThePackage() async throws {
        let adafruit = VirtualLegacyDevice(profile: LegacyKitFixture.profile(LegacyDeviceProfile.adafruitNRF52832), clock: ContinuousClock())
        let otherType = try LegacyKitFixture.package(deviceType: 0xFFFF)
        do {
            _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [adafruit]), clock: ContinuousClock())
                .update(LegacyKitFixture.request(otherType))
            Issue.record("an init packet for another device type was taken")
        } catch {
            #expect(error.code == .deviceMismatch, "\(error)")
            #expect(error.message.contains("takes device type 0x0052 only"), "\(error.message)")
            #expect(!error.message.contains("\n"))
        }
        #expect(await adafruit.state().transfer.bytesAccepted == 0)
        #expect(await adafruit.state().mode == .application)
        // Nothing reached the bootloader: bank 0 still holds the application, nothing was erased or sent.
        let state = await adafruit.state()
        #expect(state.bank0 == .validApp && state.installed.application?.version == 1, "\(state.bank0)")
        #expect(state.counters.packetsReceived == 0, "\(state.counters)")

        // SDK 11 nRF51 dual bank: the application area 0x1B000-0x3C000 holds two banks of 0x10800 bytes at most.
        let nrf51 = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        let large = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let tooLarge = try LegacyKitFixture.package(image: large)
        do {
            _ = try await Updater(adapter: VirtualDeviceAdapter(devices: [nrf51]), clock: ContinuousClock())
                .update(LegacyKitFixture.request(tooLarge))
            Issue.record("an image larger than the bank was taken")
        } catch {
            #expect(error.code == .incompatiblePackage, "\(error)")
            #expect(error.message.contains("Start DFU (0x01) refused: data size exceeds limit (0x04)"), "\(error.message)")
        }
        let old = await nrf51.state()
        #expect(old.installed.application?.version == 1 && old.transfer.bytesAccepted == 0, "\(old.transfer)")
    }

    /// `--family` (the request's family) overrides detection: a Legacy package forced onto the Secure or the SMP
    /// family is refused by that family's plan (one line, nothing sent), where auto-detection would have picked
    /// Legacy; forced to Legacy, the same update goes through.
    @Test func familyOverride() async throws {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(), clock: ContinuousClock())
        let adapter = VirtualDeviceAdapter(devices: [device])
        let package = try LegacyKitFixture.package()
        // Another family's package is incompatible-package (exit 46), as DFUFamily.plan's contract says, the same
        // code auto-detection gives for a Legacy package on a device of another family.
        for (forced, says) in [(DFUFamilyID.secure, "is a Legacy DFU package (dfu_version 0.5), not a Secure DFU package"), (.smp, "not an SMP package")] {
            do {
                _ = try await Updater(adapter: adapter, clock: ContinuousClock()).update(LegacyKitFixture.request(package, family: forced))
                Issue.record("--family \(forced) sent a Legacy package")
            } catch {
                #expect(error.code == .incompatiblePackage, "\(forced): \(error)")
                #expect(error.family == forced, "\(forced): \(error)")
                #expect(error.message.contains(says) && !error.message.contains("\n"), "\(forced): \(error.message)")
            }
        }
        #expect(await device.state().counters.packetsReceived == 0)
        let result = try await Updater(adapter: adapter, clock: ContinuousClock()).update(LegacyKitFixture.request(package, family: .legacy))
        #expect(result.family == .legacy)
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
    }

    /// InfiniTime: no jump (the service is in the application), the image, the watch resets into it.
    @Test func pineTime() async throws {
        let device = VirtualLegacyDevice(profile: LegacyKitFixture.profile(LegacyDeviceProfile.pineTime), clock: ContinuousClock())
        let result = try await Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(LegacyKitFixture.request(try LegacyKitFixture.package(), family: .legacy))
        #expect(result.family == .legacy)
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(LegacyKitFixture.image))
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
