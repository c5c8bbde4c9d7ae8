import BLECore
import BledfuTestSupport
import DFUCore
import DFUPackage
@testable import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

@testable import BledfuKit

/// Issue 19 point 3, never strand a device: a package the device would refuse is refused before the jump from what
/// the device tells (one line, `device-mismatch`, the device still in its application); a refusal only the
/// bootloader can make (the signing key) ends with the device sent back to its application and the line saying so.
/// Each test asserts the device's state afterwards.
@Suite(.timeLimit(.minutes(10))) struct NeverStrandTests {
    static func secureDevice(installedVersion: UInt32 = 1, keys: [String] = []) -> VirtualDevice {
        var profile = KitFixture.profile()
        profile.installed.application = InstalledImage(version: installedVersion)
        if !keys.isEmpty {
            profile.publicKeys = keys
            profile.requireSignedApp = true
        }
        return VirtualDevice(profile: profile, clock: ContinuousClock())
    }

    static func securePackage(hw: UInt32 = 52, version: UInt32 = 2, keyPEM: String? = nil) throws
        -> PackageSource
    {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: KitFixture.image)
        builder.applicationVersion = version
        builder.hwVersion = hw
        builder.sdReq = [0xB7]
        builder.signingKey = try keyPEM.map { try PackageKeys.privateKey(pem: $0) }
        let bytes = try builder.archive()
        return PackageSource(fileName: "app.zip", bytes: bytes, sha256: DFUSimulatorDigest.sha256Hex(bytes))
    }

    /// Runs the update to its error, with its events.
    static func failing(_ updater: Updater, _ request: UpdateRequest) async throws -> (DFUError, [UpdateEvent]) {
        let run = updater.start(request)
        var events: [UpdateEvent] = []
        for await event in run { events.append(event) }
        do {
            _ = try await run.result()
        } catch {
            return (error, events)
        }
        Issue.record("the update succeeded")
        throw CancellationError()
    }

    /// The updater went for the jump (the checks before it passed).
    static func jumped(_ events: [UpdateEvent]) -> Bool {
        events.contains { if case .applicationMode = $0 { true } else { false } }
    }

    /// Another hardware version: refused before the jump from the Hardware Revision.
    @Test func anotherHardwareVersionIsRefusedBeforeTheJump() async throws {
        let device = Self.secureDevice()
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let (error, events) = try await Self.failing(updater, KitFixture.request(try Self.securePackage(hw: 52840)))
        #expect(error.code == .deviceMismatch)
        #expect(
            error.message
                == "the device would refuse app.zip: application is for hardware version 52840, the device is hardware"
                + " revision 52 (\"52\"); nothing was sent, the device still runs its application", "\(error.message)")
        #expect(!Self.jumped(events))
        let state = await device.state()
        #expect(state.mode == .application)
        #expect(state.installed.application?.version == 1)
        #expect(!state.settings.initCommandPresent)
    }

    /// A downgrade: refused before the jump from the Firmware Revision (the SDK's rule: an application's
    /// fw_version must be at least the running one's).
    @Test func aDowngradeIsRefusedBeforeTheJump() async throws {
        let device = Self.secureDevice(installedVersion: 3)
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let (error, events) = try await Self.failing(updater, KitFixture.request(try Self.securePackage(version: 2)))
        #expect(error.code == .deviceMismatch)
        #expect(error.message.contains("application version 2 is a downgrade from the running 3"), "\(error.message)")
        #expect(error.message.hasSuffix("nothing was sent, the device still runs its application"))
        #expect(!Self.jumped(events))
        let state = await device.state()
        #expect(state.mode == .application && state.installed.application?.version == 3)
    }

    /// The same version again is allowed (≥), and what was checked and not checked is said.
    @Test func theChecksAreSaidBeforeTheJump() async throws {
        let device = Self.secureDevice(installedVersion: 2)
        let run = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .start(KitFixture.request(try Self.securePackage(version: 2)))
        var messages: [String] = []
        for await event in run { if case .message(let text) = event { messages.append(text) } }
        _ = try await run.result()
        #expect(messages.contains { $0.hasPrefix("checked before the jump: application: hardware version 52") }, "\(messages)")
        #expect(messages.contains { $0.contains("application: version 2 ≥ the running 2") }, "\(messages)")
        #expect(messages.contains { $0.hasPrefix("not checked before the jump:") && $0.contains("sd_req 0xB7") }, "\(messages)")
        #expect(await device.state().installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(KitFixture.image))
    }

    /// Signed with another key: nothing in application mode tells the key, so the device jumps; its bootloader
    /// refuses the init packet; the updater sends Abort and finds the device back in its application.
    @Test func anotherSigningKeyEndsWithTheDeviceBackInItsApplication() async throws {
        // A device entry may be a private key PEM: its public half is the trusted key.
        let device = Self.secureDevice(keys: [PackageKeys.generatePrivateKeyPEM()])
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let package = try Self.securePackage(keyPEM: PackageKeys.generatePrivateKeyPEM())
        let (error, events) = try await Self.failing(updater, KitFixture.request(package))
        #expect(Self.jumped(events))
        #expect(error.code == .remoteRefusal, "\(error)")
        #expect(error.message.hasSuffix("; the device is back in its application"), "\(error.message)")
        #expect(!error.message.contains("\n"))
        #expect(error.location?.addresses.first == KitFixture.address)
        let notChecked = events.compactMap { if case .message(let text) = $0, text.hasPrefix("not checked") { text } else { nil } }
        #expect(notChecked.contains { $0.contains("the signing key") }, "\(notChecked)")
        let state = await device.state()
        #expect(state.mode == .application)
        #expect(state.installed.application?.version == 1)
    }

    /// An SDK 14 bootloader has no Abort: it answers `60 0C 02` and stays. The line says where the device waits and
    /// why nothing the host can send brings it back (not "no valid application": its application is intact), and
    /// `leaveUpdater` (`bledfu device reset`) says the same.
    @Test func aBootloaderWithoutAbortIsNamedWhereItWaits() async throws {
        var profile = KitFixture.profile()
        profile.sdkVersion = "14.2.0"
        profile.publicKeys = [PackageKeys.generatePrivateKeyPEM()]
        profile.requireSignedApp = true
        let device = VirtualDevice(profile: profile, clock: ContinuousClock())
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let package = try Self.securePackage(keyPEM: PackageKeys.generatePrivateKeyPEM())
        let (error, events) = try await Self.failing(updater, KitFixture.request(package))
        #expect(Self.jumped(events))
        #expect(error.code == .remoteRefusal, "\(error)")
        let bootloader = KitFixture.address.nordicBootloaderAddress
        #expect(
            error.message.hasSuffix(
                "; the device waits in its bootloader at \(bootloader) (the bootloader answered Abort with opcode not supported "
                    + "(0x02), as SDK 12-14 do: it leaves on a power cycle or its own inactivity timeout)"),
            "\(error.message)")
        #expect(error.location?.addresses.first == bootloader)
        #expect(await device.state().mode == .bootloader)
        #expect(await device.state().installed.application?.version == 1)

        let target = UpdateTarget.address(PeerAddress(KitFixture.address, type: .random))
        do {
            _ = try await updater.leaveUpdater(InspectionRequest(target: target))
            Issue.record("an SDK 14 bootloader left on Abort")
        } catch {
            #expect(
                error.message.hasPrefix("the device stays in its bootloader at \(bootloader): the bootloader answered Abort with opcode not supported"),
                "\(error.message)")
        }
        #expect(await device.state().mode == .bootloader)
    }

    /// A device that does not tell its Hardware Revision: the hardware version is named as not checked, the device
    /// jumps, its bootloader refuses the init packet (HW version failure), and Abort brings it back to its
    /// application; the line says so.
    @Test func anUntoldHardwareVersionEndsWithTheDeviceBackInItsApplication() async throws {
        var profile = KitFixture.profile()
        profile.hardwareRevision = ""
        let device = VirtualDevice(profile: profile, clock: ContinuousClock())
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let (error, events) = try await Self.failing(updater, KitFixture.request(try Self.securePackage(hw: 52840)))
        let notChecked = events.compactMap { if case .message(let text) = $0, text.hasPrefix("not checked") { text } else { nil } }
        #expect(
            notChecked.contains { $0.contains("application: hardware version 52840: the device tells no Hardware Revision") },
            "\(notChecked)")
        #expect(Self.jumped(events))
        #expect(error.code == .remoteRefusal, "\(error)")
        #expect(error.message.lowercased().contains("hw version") || error.message.lowercased().contains("hardware"), "\(error.message)")
        #expect(error.message.hasSuffix("; the device is back in its application"), "\(error.message)")
        let state = await device.state()
        #expect(state.mode == .application && state.installed.application?.version == 1)
    }

    /// The inspection API: family, mode, Device Information, and what an update with a package would do.
    @Test func inspectionSaysWhatAnUpdateWouldDo() async throws {
        let device = Self.secureDevice()
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let target = UpdateTarget.address(PeerAddress(KitFixture.address, type: .random))
        let plain = try await updater.inspect(InspectionRequest(target: target))
        #expect(plain.family == .secure && plain.mode == .application)
        #expect(plain.information.hardwareRevision == "52" && plain.information.firmwareRevision == "1")
        #expect(plain.information.model == "nRF52832" && plain.information.name == "Bracelet")
        #expect(plain.applicationVersion == 1)
        let refused = try await updater.inspect(InspectionRequest(target: target, package: try Self.securePackage(hw: 51)))
        #expect(refused.assessment.refusals.count == 1)
        #expect(refused.assessment.effect == "application 1 → 2")
        #expect(await device.state().mode == .application)
    }

    /// A device left in its bootloader (a jump, then nothing): `leaveUpdater` (the API of `bledfu device reset`)
    /// sends Abort and finds it back in its application; given the application's address it finds the bootloader
    /// at address + 1 first.
    @Test func aDeviceLeftInItsBootloaderIsBroughtBack() async throws {
        let device = Self.secureDevice()
        await device.enterBootloader()
        #expect(await device.state().mode == .bootloader)
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
        let target = UpdateTarget.address(PeerAddress(KitFixture.address, type: .random))
        let before = try await updater.inspect(InspectionRequest(target: target))
        #expect(before.mode == .updater && before.address == KitFixture.address.nordicBootloaderAddress.description)
        let report = try await updater.leaveUpdater(InspectionRequest(target: target))
        #expect(report.backInApplication)
        #expect(report.message == "the device is back in its application (\(KitFixture.address))")
        #expect(await device.state().mode == .application)
        // Already in its application: nothing to do.
        let again = try await updater.leaveUpdater(InspectionRequest(target: target))
        #expect(again.message.contains("nothing to do"))
    }

    /// Legacy, another device type: an Adafruit application (manufacturer "Adafruit Industries") runs over
    /// Adafruit's bootloader, which takes device type 0x0052 only: refused before the jump (its single bank would have
    /// erased the application at Start). An SDK 11 device keeps its device type in UICR, which the application does not
    /// tell: the device jumps, refuses `10 02 06`, gets Reset (`06`) and, dual bank, is back in its application.
    @Test func legacyAnotherDeviceType() async throws {
        let adafruit = VirtualLegacyDevice(profile: LegacyKitFixture.profile(LegacyDeviceProfile.adafruitNRF52832), clock: ContinuousClock())
        let (error, events) = try await Self.failing(
            Updater(adapter: VirtualDeviceAdapter(devices: [adafruit]), clock: ContinuousClock()),
            LegacyKitFixture.request(try LegacyKitFixture.package(deviceType: 0xFFFF)))
        #expect(error.code == .deviceMismatch)
        #expect(
            error.message
                == "the device would refuse legacy-app.zip: application is for device type 0xFFFF; the device's Adafruit"
                + " bootloader (manufacturer \"Adafruit Industries\") takes device type 0x0052 only; nothing was sent, the"
                + " device still runs its application", "\(error.message)")
        #expect(!Self.jumped(events))
        let state = await adafruit.state()
        #expect(state.mode == .application && state.installed.application?.version == 1)

        var profile = LegacyKitFixture.profile()
        profile.deviceType = 0x0001
        let sdk11 = VirtualLegacyDevice(profile: profile, clock: ContinuousClock())
        let (refused, said) = try await Self.failing(
            Updater(adapter: VirtualDeviceAdapter(devices: [sdk11]), clock: ContinuousClock()),
            LegacyKitFixture.request(try LegacyKitFixture.package(deviceType: 0x0002)))
        #expect(Self.jumped(said))
        #expect(refused.code == .incompatiblePackage)
        #expect(refused.message.contains("refused: operation failed (0x06)"), "\(refused.message)")
        #expect(refused.message.hasSuffix("; the device is back in its application"), "\(refused.message)")
        #expect(!refused.message.contains("\n"))
        let back = await sdk11.state()
        #expect(back.mode == .application && back.installed.application?.version == 1)
    }

    /// Legacy on Adafruit's single-bank bootloader, a SoftDevice list without the installed FWID (not told in
    /// application mode): Start has erased the application by the time Initialize refuses the list (`10 02 06`), so
    /// after Reset the device comes back in its bootloader at address + 1, and the line says so.
    @Test func legacyRefusalAfterTheApplicationWasErasedSaysWhereTheDeviceIs() async throws {
        let adafruit = VirtualLegacyDevice(profile: LegacyKitFixture.profile(LegacyDeviceProfile.adafruitNRF52832), clock: ContinuousClock())
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: LegacyKitFixture.image)
        builder.applicationVersion = 2
        builder.sdReq = [0x1234]
        builder.legacy = LegacyOptions(deviceType: 0x0052)
        let bytes = try builder.archive()
        let package = PackageSource(fileName: "other-sd.zip", bytes: bytes, sha256: DFUSimulatorDigest.sha256Hex(bytes))
        let (error, events) = try await Self.failing(
            Updater(adapter: VirtualDeviceAdapter(devices: [adafruit]), clock: ContinuousClock()),
            LegacyKitFixture.request(package))
        #expect(Self.jumped(events))
        let bootloader = LegacyKitFixture.address.nordicBootloaderAddress
        #expect(
            error.message.hasSuffix(
                "; the device stays in its bootloader at \(bootloader): it has no valid application to return to (flash a"
                    + " complete package)"), "\(error.message)")
        #expect(error.location?.addresses.first == bootloader)
        let state = await adafruit.state()
        #expect(state.mode == .bootloader && state.installed.application == nil, "\(state.mode)")
    }

    /// Legacy, the SDK 11 signing template with another key: the key is not told, the device jumps, refuses the
    /// init packet, gets Reset and is back in its application.
    @Test func legacySigningTemplateWithAnotherKey() async throws {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: LegacyKitFixture.image)
        builder.applicationVersion = 2
        builder.legacy = LegacyOptions()
        builder.signingKey = try PackageKeys.privateKey(pem: PackageKeys.generatePrivateKeyPEM())
        let bytes = try builder.archive()
        let signed = PackageSource(fileName: "signed.zip", bytes: bytes, sha256: DFUSimulatorDigest.sha256Hex(bytes))
        let template = VirtualLegacyDevice(
            profile: LegacyKitFixture.profile { .sdk11NRF51Signed(address: $0, key: LegacyDeviceProfile.sdk11SigningTemplateKey) },
            clock: ContinuousClock())
        let (refused, said) = try await Self.failing(
            Updater(adapter: VirtualDeviceAdapter(devices: [template]), clock: ContinuousClock()),
            LegacyKitFixture.request(signed))
        #expect(Self.jumped(said))
        #expect(refused.message.hasSuffix("; the device is back in its application"), "\(refused.message)")
        let notChecked = said.compactMap { if case .message(let text) = $0, text.hasPrefix("not checked") { text } else { nil } }
        #expect(notChecked.contains { $0.contains("the signing key") }, "\(notChecked)")
        let kept = await template.state()
        #expect(kept.mode == .application && kept.installed.application?.version == 1)
    }

    /// SMP with MCUboot's downgrade prevention, which the device tells (bootloader info `no-downgrade`): an older
    /// image is refused before anything is sent; the device keeps running its image.
    @Test func smpDowngradeIsRefusedBeforeSending() async throws {
        var profile = try JSONDecoder().decode(
            SMPDeviceProfile.self,
            from: Data(contentsOf: SMPFamilyTests.root.appendingPathComponent("Firmware/smp-sensor.json")))
        profile.speedup = 2000
        profile.mcuboot.downgradePrevention = true
        let device = VirtualSMPDevice(profile: profile, clock: ContinuousClock())
        let body = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let image = try MCUbootImage.sign(firmware: body, version: MCUbootVersion("0.9.0") ?? MCUbootVersion(major: 0), key: nil)
        let package = PackageSource(fileName: "old.bin", bytes: image.bytes, sha256: DFUSimulatorDigest.sha256Hex(image.bytes))
        let (error, _) = try await Self.failing(
            Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock()),
            SMPFamilyTests.request(package, device: device))
        #expect(error.code == .deviceMismatch, "\(error)")
        #expect(
            error.message
                == "the device would refuse old.bin: image 0 0.9.0 is a downgrade from the running 1.0.0, which MCUboot"
                + " refuses (the device reports no-downgrade): it would erase it at the next boot and run 1.0.0 again;"
                + " nothing was sent, the device is unchanged", "\(error.message)")
        #expect(await device.state().counters.uploadBytesReceived == 0)
        #expect(await device.imageState().active()?.version == "1.0.0")
    }
}
