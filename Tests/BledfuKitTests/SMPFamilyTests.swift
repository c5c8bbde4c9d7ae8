import BLECore
import BledfuTestSupport
import DFUCore
import DFUSimulator
import Foundation
import MCUbootImage
import MCUmgr
import Testing

@testable import BledfuKit

/// The SMP family through the updater: auto-detection from the package and the services, the upload, test,
/// reset, reconnect, check and confirm, over real socket pairs to a virtual SMP device.
@Suite(.timeLimit(.minutes(10))) struct SMPFamilyTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func device(faults: SMPFaults = .none, speedup: Double = 2000) throws -> VirtualSMPDevice {
        var profile = try JSONDecoder().decode(
            SMPDeviceProfile.self, from: Data(contentsOf: root.appendingPathComponent("Firmware/smp-sensor.json")))
        profile.speedup = speedup
        return VirtualSMPDevice(profile: profile, faults: faults, clock: ContinuousClock())
    }

    static func package() throws -> (PackageSource, MCUbootImage) {
        let bytes = Array(try Data(contentsOf: root.appendingPathComponent("Firmware/samples/smp-sensor-app-v2.bin")))
        return (
            SyntheticPackage.source(bytes, fileName: "smp-sensor-app-v2.bin"),
            try MCUbootImage(bytes: bytes)
        )
    }

    static func request(_ package: PackageSource, device: VirtualSMPDevice, settings: [String: String] = [:]) -> UpdateRequest {
        // Deadlines only bound a hang: the suite must pass beside CPU hogs on two cores.
        UpdateRequest(
            package: package, target: .address(PeerAddress(device.profile.address, type: .random)),
            options: UpdateOptions(responseTimeout: .seconds(60), rebootDelay: .milliseconds(50), settings: settings),
            scanTimeout: .seconds(60), connectTimeout: .seconds(60))
    }

    @Test func autoDetectedSMPUpdateEndsConfirmed() async throws {
        let device = try Self.device()
        let (package, image) = try Self.package()
        let result = try await Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(Self.request(package, device: device))
        #expect(result.family == .smp)
        let active = try #require(await device.imageState().active())
        #expect(active.hash == image.hashTLV)
        #expect(active.confirmed)
        #expect(result.summary?.contains("2.0.0, active, confirmed") == true)
    }

    @Test func aLostLinkResumesFromTheDeviceOffset() async throws {
        let device = try Self.device(faults: SMPFaults(plan: try FaultPlan(parsing: "disconnect-after-bytes=20000")))
        let (package, image) = try Self.package()
        _ = try await Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(Self.request(package, device: device))
        #expect(await device.imageState().active()?.hash == image.hashTLV)
        let counters = await device.state().counters
        #expect(counters.uploadBytesReceived <= image.bytes.count + 3 * 2475 + 32)
    }

    /// Issue 16 §4, across stations: station A's run is killed half way (its journal keeps the offset); station B,
    /// with a journal directory of its own that knows nothing of it (another machine or state dir), updates the same
    /// device: it starts at the offset the device holds for the same `sha`, sends at most one window twice, and the
    /// device ends with the new image confirmed.
    @Test func anotherStationResumesFromTheDeviceOffset() async throws {
        // Real time divided by 4: the upload takes about a second, so the kill lands inside it even on a loaded machine.
        let device = try Self.device(speedup: 4)
        let (package, image) = try Self.package()
        let adapter = VirtualSMPDeviceAdapter(devices: [device])
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-smp-stations-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        func station(_ name: String) -> JournalFileStore {
            JournalFileStore(
                directory: root.appendingPathComponent(name), packagePath: "/\(name)/smp-sensor-app-v2.bin", adapter: "virtual",
                addressType: "random")
        }
        let half = image.bytes.count / 2
        let first = Updater(adapter: adapter, clock: ContinuousClock(), journal: station("a"))
            .start(Self.request(package, device: device))
        for await event in first {
            if case .progress(let progress) = event, progress.bytes >= half { first.cancel() }
        }
        await #expect(throws: DFUError.self) { try await first.result() }
        let held = try #require(await device.state().upload?.offset)
        #expect(held >= half && held < image.bytes.count, "held \(held)")
        let receivedBefore = await device.state().counters.uploadBytesReceived
        // Station A's journal has the offset; station B's directory is empty.
        let savedA = try await station("a").load(deviceAddress: device.profile.address.description, packageSHA256: package.sha256)
        #expect(try savedA?.resume?.decode(SMPResume.self).offset ?? 0 > 0)
        #expect(try await station("b").load(deviceAddress: device.profile.address.description, packageSHA256: package.sha256) == nil)

        let second = Updater(adapter: adapter, clock: ContinuousClock(), journal: station("b"))
            .start(Self.request(package, device: device))
        var firstProgress: Int?
        var events: [UpdateEvent] = []
        for await event in second {
            if case .progress(let progress) = event, firstProgress == nil { firstProgress = progress.bytes }
            if case .progress = event {} else { events.append(event) }
        }
        do {
            _ = try await second.result()
        } catch {
            Issue.record("station B: \(error); events: \(events)")
            throw error
        }
        // Station B's first progress is the device's offset (at least what it held when A was killed).
        let resumedAt = try #require(firstProgress)
        #expect(resumedAt >= held, "held \(held), station B started at \(resumedAt)")
        let active = try #require(await device.imageState().active())
        #expect(active.hash == image.hashTLV && active.confirmed)
        // Station B sent the rest, and again at most the window in flight (buf_count − 1 = 3 chunks of less than 2475
        // bytes) and its 32-byte first chunk.
        let sentByB = await device.state().counters.uploadBytesReceived - receivedBefore
        #expect(sentByB <= image.bytes.count - held + 3 * 2475 + 32, "station B sent \(sentByB) bytes, the device held \(held)")
    }

    @Test func uploadOnlyLeavesThePendingDecisionToTheUser() async throws {
        let device = try Self.device()
        let (package, image) = try Self.package()
        _ = try await Updater(adapter: VirtualSMPDeviceAdapter(devices: [device]), clock: ContinuousClock())
            .update(Self.request(package, device: device, settings: ["smp.confirm": "upload-only"]))
        let state = await device.imageState()
        #expect(state.slot(withHash: image.hashTLV ?? [])?.slot == 1)
        #expect(state.active()?.hash != image.hashTLV)
    }

    @Test func familyPlansOnlyMCUbootFiles() throws {
        let nordic = PackageSource(fileName: "app.zip", bytes: try KitFixture.package().bytes, sha256: "")
        #expect(throws: DFUError.self) { _ = try SMPFamily().plan(nordic, options: UpdateOptions()) }
        do {
            _ = try SMPFamily().plan(nordic, options: UpdateOptions())
        } catch {
            #expect(error.code == .incompatiblePackage)
        }
        let (package, _) = try Self.package()
        let plan = try SMPFamily().plan(package, options: UpdateOptions())
        #expect(plan.parts.map(\.imageIndex) == [0])
        var tampered = package
        tampered.bytes[3000] ^= 1
        do {
            _ = try SMPFamily().plan(tampered, options: UpdateOptions())
            Issue.record("a tampered image was planned")
        } catch {
            #expect(error.code == .invalidPackage)
        }
    }
}
