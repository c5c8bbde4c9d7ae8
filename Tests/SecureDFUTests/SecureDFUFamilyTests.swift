import BLECore
import DFUCore
import DFUPackage
import DFUSimulator
import GATT
import Logging
import Synchronization
import TestDoubles
import Testing

@testable import SecureDFU

/// The Secure DFU family through the seam, against a virtual device over in-memory bearers: plan, detect, the
/// buttonless jump, one part with journal checkpoints. The updater's whole flow is tested in BledfuKitTests.
@Suite(.timeLimit(.minutes(5))) struct SecureDFUFamilyTests {
    static func source(_ bytes: [UInt8], name: String = "app.zip") -> PackageSource {
        PackageSource(fileName: name, bytes: bytes, sha256: "test")
    }

    static func securePackage() throws -> [UInt8] {
        var builder = PackageBuilder()
        builder.application = PackageBuilder.Image(stem: "app", bytes: SimulatorFixture.image)
        builder.applicationVersion = 2
        builder.hwVersion = 52
        builder.sdReq = [0xB7]
        return try builder.archive()
    }

    @Test func planSecurePackage() throws {
        let plan = try SecureDFUFamily().plan(Self.source(try Self.securePackage()), options: UpdateOptions())
        #expect(plan.family == .secure)
        #expect(plan.parts.map(\.name) == ["application"])
        #expect(plan.totalBytes == SimulatorFixture.image.count)
        #expect(throws: DFUError(.invalidPackage, "")) {
            try SecureDFUFamily().plan(Self.source(try Self.securePackage()), options: UpdateOptions(scope: .system))
        }
    }

    /// Another family's package is refused with one line naming what it is.
    @Test func planRefusesOtherFamilies() throws {
        var legacy = PackageBuilder()
        legacy.application = PackageBuilder.Image(stem: "app", bytes: SimulatorFixture.image)
        legacy.applicationVersion = 2
        legacy.legacy = LegacyOptions()
        let legacyZip = try legacy.archive()
        do {
            _ = try SecureDFUFamily().plan(Self.source(legacyZip), options: UpdateOptions())
            Issue.record("a Legacy package was planned")
        } catch {
            #expect(error.code == .incompatiblePackage)
            #expect(error.message == "app.zip is a Legacy DFU package (dfu_version 0.5), not a Secure DFU package")
        }
        // An MCUboot image (magic 0x96f3b83d, little-endian) is no zip.
        #expect(throws: DFUError(.incompatiblePackage, "")) {
            try SecureDFUFamily().plan(Self.source([0x3D, 0xB8, 0xF3, 0x96] + [UInt8](repeating: 0, count: 60), name: "app.bin"), options: UpdateOptions())
        }
        // A zip that is broken is this family's problem: invalid, with the package error as the cause.
        var broken = try Self.securePackage()
        broken.removeLast(40)
        do {
            _ = try SecureDFUFamily().plan(Self.source(broken), options: UpdateOptions())
            Issue.record("a truncated package was planned")
        } catch {
            #expect(error.code == .invalidPackage)
            #expect(error.cause is PackageError)
        }
    }

    /// Application mode → buttonless jump → bootloader at address + 1 → one part, journaled at each object.
    @Test func detectJumpAndUpload() async throws {
        var profile = try SimulatorFixture.profile()
        profile.requireSignedApp = false
        profile.installed.application = InstalledImage(version: 1)
        let device = VirtualDevice(profile: profile, clock: ContinuousClock())
        let family = SecureDFUFamily()
        let events = Mutex<[UpdateEvent]>([])
        let context = UpdateContext(
            clock: UpdateClock(ManualClock()), options: UpdateOptions(pacing: "prn:12"), logger: Logger(label: "test"),
            emit: { event in events.withLock { $0.append(event) } },
            connect: { location throws(DFUError) in throw DFUError(.notFound, "\(location)") })

        // 1. The application: FE59 with the buttonless characteristic without bonds.
        var (link, serving) = try await Self.connect(device, peer: profile.address)
        let services = try await link.gatt.discoverPrimaryServices()
        guard case .application(let entry, _, let bonded)? = try await family.detect(services, on: link, context: context) else {
            Issue.record("not detected as an application")
            return
        }
        #expect(!bonded)
        let location = try await family.enterUpdater(entry, on: link, context: context)
        await link.close()
        await serving.value
        #expect(location.addresses == [profile.address.nordicBootloaderAddress])
        #expect(events.withLock { $0 } == [.jumping(address: profile.address.description, bonded: false)])

        // 2. The bootloader: ready; one part, checkpoints after each executed object.
        (link, serving) = try await Self.connect(device, peer: profile.address.nordicBootloaderAddress)
        let detected = try await family.detect(try await link.gatt.discoverPrimaryServices(), on: link, context: context)
        guard case .updater? = detected else {
            Issue.record("bootloader not detected: \(String(describing: detected))")
            return
        }
        let checkpoints = Mutex<[Int]>([])
        let partContext = PartContext<SecureResume>(
            update: context, index: 0, count: 1, resume: nil,
            checkpoint: { _, bytes in checkpoints.withLock { $0.append(bytes) } }, progress: { _ in })
        let outcome = try await family.upload(SimulatorFixture.part(), on: link, context: partContext)
        await link.close()
        await serving.value
        #expect(outcome == .resets(DeviceLocation(PeerAddress(profile.address.nordicBootloaderAddress, type: .random))))
        #expect(checkpoints.withLock { $0 } == [4096, 8192, 10_000])
        let installed = await device.state().installed.application?.sha256
        #expect(installed == DFUSimulatorDigest.sha256Hex(SimulatorFixture.image))
    }

    static func connect(_ device: VirtualDevice, peer address: BluetoothAddress) async throws -> (DFULink, Task<Void, Never>) {
        let (client, server) = InMemoryBearer.makePair(capacity: 64)
        let serving = Task { await device.serve(server) }
        let att = ATTClient(bearer: client)
        _ = try await att.exchangeMTU(247)
        return (DFULink(gatt: GATTClient(att: att), peer: PeerAddress(address, type: .random)), serving)
    }
}
