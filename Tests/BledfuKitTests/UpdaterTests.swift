import BLECore
import BledfuTestSupport
import DFUCore
import DFUPackage
import DFUSimulator
import GATT
import TestDoubles
import Testing

@testable import BledfuKit

/// A package and a device made for each other (nRF52, SoftDevice FWID 0xB7, unsigned application accepted).
enum KitFixture {
    static let address = BluetoothAddress("C0:11:22:33:44:FF")!
    static let image = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    static func profile(application: Bool = true, faults: String? = nil) -> DeviceProfile {
        DeviceProfile(
            name: "Bracelet", address: address, hwVersion: 52, softDeviceFWID: 0xB7, saveProgress: false,
            requireSignedApp: false, publicKeys: [],
            installed: InstalledImages(
                application: application ? InstalledImage(version: 1) : nil, bootloader: InstalledImage(version: 1),
                softdevice: nil),
            link: LinkParameters(receiveBuffers: 64), flash: FlashParameters(queueDepth: 64, bankSize: 200_704),
            speedup: .infinity)
    }

    static func package() throws -> PackageSource {
        SyntheticPackage.source(try SyntheticPackage.secureApplication(image), fileName: "app.zip")
    }

    static func request(_ package: PackageSource, reconnect: ReconnectPolicy = ReconnectPolicy()) -> UpdateRequest {
        UpdateRequest(
            package: package, target: .address(PeerAddress(address, type: .random)),
            options: UpdateOptions(pacing: "prn:12", rebootDelay: .zero), reconnect: reconnect)
    }
}

@Suite(.timeLimit(.minutes(10))) struct UpdaterTests {
    /// The whole update on a manual clock: application mode, the buttonless jump to address + 1, a link lost in
    /// the middle of the image, the reconnect after its backoff (the only time that passes, moved by the test),
    /// the resume from the journal, the image installed. No real waiting.
    @Test func jumpLostLinkAndResumeOnAManualClock() async throws {
        let device = VirtualDevice(
            profile: KitFixture.profile(), faults: try FaultPlan(parsing: "disconnect-after-bytes=6000"),
            clock: ContinuousClock())
        let adapter = VirtualDeviceAdapter(devices: [device], link: .inMemory)
        let clock = ManualClock()
        let journal = InMemoryUpdateJournalStore()
        let updater = Updater(adapter: adapter, clock: clock, journal: journal)
        let package = try KitFixture.package()
        let run = updater.start(KitFixture.request(package))
        var events: [UpdateEvent] = []
        var advanced = Duration.zero
        for await event in run {
            events.append(event)
            if case .reconnecting(_, _, let delay) = event {
                // The updater waits out the backoff on its clock: the only sleeper once the lost link is closed.
                await clock.waitForSleepers(1)
                clock.advance(by: .milliseconds(delay))
                advanced += .milliseconds(delay)
            }
        }
        let result = try await run.result()
        #expect(result.family == .secure)
        #expect(result.statistics.reconnects == 1)
        // Counted from 0 in the first run and from the journal's executed offset in the resumed one: every byte at
        // least once, bytes confirmed after the last executed object twice.
        #expect(result.statistics.bytesSent >= KitFixture.image.count)
        #expect(result.statistics.bytesSent < KitFixture.image.count + 4096)
        #expect(advanced == .milliseconds(500))
        #expect(clock.now.offset == .milliseconds(500))
        let state = await device.state()
        #expect(state.installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(KitFixture.image))
        #expect(state.faults.map(\.kind) == ["disconnect"])
        #expect(try await journal.load(deviceAddress: KitFixture.address.description, packageSHA256: package.sha256) == nil)
        let bootloader = KitFixture.address.nordicBootloaderAddress.description
        #expect(events.contains(.applicationMode(address: KitFixture.address.description, bonded: false)))
        #expect(events.contains(.jumping(address: KitFixture.address.description, bonded: false)))
        #expect(events.contains(.updaterReady(family: .secure, address: bootloader)))
        #expect(events.contains(.reconnecting(attempt: 1, of: 5, delayMilliseconds: 500)))
        #expect(events.filter { if case .uploading = $0 { true } else { false } }.count == 2)
        #expect(events.last == .completed(address: KitFixture.address.description))
        // The resumed run sent only what the device had not executed: bytes confirmed add up to the image once.
        let progress = events.compactMap { if case .progress(let p) = $0 { p } else { nil } }
        #expect(progress.last?.bytes == KitFixture.image.count)
    }

    /// `--family legacy` with only Secure DFU registered: one clear line, before any connection.
    /// A Secure package made by `package create` with a SoftDevice, a bootloader and an application (SD+BL, then
    /// the application): through the updater, in that order, each image's hash on the device, nothing sent twice.
    @Test func softDeviceBootloaderThenApplication() async throws {
        let softdevice = (0..<12_288).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 3) }
        let bootloader = (0..<8_192).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 9) }
        var builder = PackageBuilder()
        builder.softdevice = PackageBuilder.Image(stem: "s140", bytes: softdevice)
        builder.bootloader = PackageBuilder.Image(stem: "bootloader", bytes: bootloader)
        builder.application = PackageBuilder.Image(stem: "app", bytes: KitFixture.image)
        builder.applicationVersion = 2
        builder.bootloaderVersion = 2
        builder.hwVersion = 52
        builder.sdReq = [0xB7]
        builder.sdID = [0xB7]
        let bytes = try builder.archive()
        let package = SyntheticPackage.source(bytes, fileName: "sd-bl-app.zip")
        let device = VirtualDevice(profile: KitFixture.profile(), clock: ContinuousClock())
        let run = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .start(KitFixture.request(package))
        var completed: [String] = []
        for await event in run { if case .partCompleted(_, let name) = event { completed.append(name) } }
        let result = try await run.result()
        #expect(completed.count == 2 && completed.last == "application", "\(completed)")
        #expect(result.statistics.bytesResent == 0)
        let installed = await device.state().installed
        #expect(installed.softdevice?.sha256 == DFUSimulatorDigest.sha256Hex(softdevice))
        #expect(installed.bootloader.sha256 == DFUSimulatorDigest.sha256Hex(bootloader))
        #expect(installed.application?.sha256 == DFUSimulatorDigest.sha256Hex(KitFixture.image))
    }

    @Test func unknownFamilyIsRefused() async throws {
        let adapter = VirtualDeviceAdapter(devices: [VirtualDevice(profile: KitFixture.profile(), clock: ContinuousClock())])
        var request = KitFixture.request(try KitFixture.package())
        request.family = DFUFamilyID("zigbee")
        do {
            _ = try await Updater(adapter: adapter, clock: ManualClock()).update(request)
            Issue.record("updated with an unknown family")
        } catch {
            #expect(error.code == .unknownFamily)
            #expect(error.message == "no family 'zigbee' is registered (available: secure, legacy, smp)")
        }
        #expect(adapter.connectionCount == 0)
    }

    /// A package no family reads: refused before connecting, with the package's own error.
    @Test func brokenPackageIsRefusedBeforeConnecting() async throws {
        let adapter = VirtualDeviceAdapter(devices: [VirtualDevice(profile: KitFixture.profile(), clock: ContinuousClock())])
        var package = try KitFixture.package()
        package.bytes.removeLast(30)
        do {
            _ = try await Updater(adapter: adapter, clock: ManualClock()).update(KitFixture.request(package))
            Issue.record("updated with a broken package")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect(error.cause is PackageError)
        }
        #expect(adapter.connectionCount == 0)
    }

    /// A stop requested during the transfer ends at the next safe point; a second run continues from the journal.
    /// `abortOnCancel` (`flash --abort-on-cancel`): a cancelled upload ends with Abort, the device discards it, and the
    /// journal goes (nothing is left to resume); without it a cancel keeps the journal (resumable). Neither installs
    /// anything: the device keeps version 1.
    @Test(arguments: [true, false]) func cancellingWithAndWithoutAbort(abort: Bool) async throws {
        var profile = KitFixture.profile()
        profile.speedup = 5  // the image takes long enough for the cancel to land inside it
        let device = VirtualDevice(profile: profile, clock: ContinuousClock())
        let journal = InMemoryUpdateJournalStore()
        let updater = Updater(adapter: VirtualDeviceAdapter(devices: [device]), clock: ContinuousClock(), journal: journal)
        // 40 KB: about ten objects, so the cancel lands inside the image even when the host is slow to read events.
        let image = SyntheticPackage.image(40_000, seed: 8)
        let package = SyntheticPackage.source(try SyntheticPackage.secureApplication(image), fileName: "app.zip")
        var request = KitFixture.request(package)
        request.options.abortOnCancel = abort
        let run = updater.start(request)
        var cancelledAt: Int?
        for await event in run {
            // Past the first object: it was executed, so the journal holds it.
            if case .progress(let progress) = event, progress.bytes > 4096, cancelledAt == nil {
                cancelledAt = progress.bytes
                run.cancel()
            }
        }
        let at = try #require(cancelledAt)
        #expect(at < image.count)
        do {
            _ = try await run.result()
            Issue.record("a cancelled update succeeded")
        } catch {
            #expect(error.code == .cancelled, "\(error)")
            #expect(error.message == (abort ? "aborted: the device discarded the upload" : "cancelled; the upload is resumable"))
        }
        let saved = try await journal.load(deviceAddress: KitFixture.address.description, packageSHA256: package.sha256)
        #expect((saved == nil) == abort, "journal: \(String(describing: saved))")
        #expect(await device.state().installed.application?.version == 1)
    }

    @Test func stopAtASafePointThenResume() async throws {
        let device = VirtualDevice(profile: KitFixture.profile(application: false), clock: ContinuousClock())
        let adapter = VirtualDeviceAdapter(devices: [device], link: .inMemory)
        let journal = InMemoryUpdateJournalStore()
        let updater = Updater(adapter: adapter, clock: ManualClock(), journal: journal)
        let package = try KitFixture.package()
        let first = updater.start(KitFixture.request(package))
        for await event in first {
            if case .progress(let progress) = event, progress.bytes > 0 { _ = first.stop() }
        }
        await #expect(throws: DFUError(.stopped, "")) { try await first.result() }
        let saved = try #require(try await journal.load(deviceAddress: KitFixture.address.description, packageSHA256: package.sha256))
        #expect(saved.confirmedBytes > 0)
        #expect(saved.confirmedBytes < KitFixture.image.count)
        let second = try await updater.update(KitFixture.request(package))
        #expect(second.statistics.bytesSent == KitFixture.image.count - saved.confirmedBytes)
        let installed = await device.state().installed.application?.sha256
        #expect(installed == DFUSimulatorDigest.sha256Hex(KitFixture.image))
    }
}
