import ATT
import BLECore
import DFUPackage
import DFUProtocol
import DFUSimulator
import Foundation
import GATT
import SecureDFU
import Synchronization
import Testing
import VirtualRadio

/// What crossed a ``CountingTransport``: Packet bytes by object type, and the Control Point conversation.
struct TransportCounts: Sendable {
    var initBytes = 0
    var dataBytes = 0
    /// The object type of the last Select or Create (0x01 command, 0x02 data).
    var currentType: UInt8 = 0
}

/// A ``DFUTransport`` that counts the bytes it carries (for the resend bound) before handing them on.
final class CountingTransport: DFUTransport, Sendable {
    let inner: any DFUTransport
    let counts: Mutex<TransportCounts>

    init(_ inner: any DFUTransport, counts: TransportCounts) {
        self.inner = inner
        self.counts = Mutex(counts)
    }

    func writeControlPoint(_ bytes: [UInt8]) async throws(DFUTransportError) {
        // Select (06) and Create (01) name the object type in byte 1.
        if bytes.count >= 2, bytes[0] == 0x06 || bytes[0] == 0x01 { counts.withLock { $0.currentType = bytes[1] } }
        try await inner.writeControlPoint(bytes)
    }

    func writePacket(_ bytes: [UInt8]) async throws(DFUTransportError) {
        counts.withLock { count in
            if count.currentType == 0x02 { count.dataBytes += bytes.count } else { count.initBytes += bytes.count }
        }
        try await inner.writePacket(bytes)
    }

    func writePackets(_ packets: [ArraySlice<UInt8>]) async throws(DFUTransportError) {
        let bytes = packets.reduce(0) { $0 + $1.count }
        counts.withLock { count in
            if count.currentType == 0x02 { count.dataBytes += bytes } else { count.initBytes += bytes }
        }
        try await inner.writePackets(packets)
    }

    var controlPointNotifications: AsyncStream<[UInt8]> { inner.controlPointNotifications }
    var mtu: Int { get async { await inner.mtu } }
    var peerFault: DFUTransportError? { get async { await inner.peerFault } }
}

/// The result of one in-process update: engine outcome, link losses, bytes, the device afterwards.
struct CampaignOutcome: Sendable, CustomStringConvertible {
    var failure: DFUEngineError?
    var disconnects = 0
    var counts = TransportCounts()
    var skippedParts: [String] = []
    var state: DeviceState?

    var succeeded: Bool { failure == nil }
    var description: String {
        "failure: \(failure.map { "\($0)" } ?? "none"), disconnects \(disconnects), data \(counts.dataBytes) B, "
            + "init \(counts.initBytes) B, skipped \(skippedParts), faults \(state?.faults.map(\.description) ?? [])"
    }
}

/// `bledfu flash` in-process: a ``VirtualDevice`` served over real `socketpair(AF_UNIX, SOCK_SEQPACKET)` links, the
/// engine (``SecureDFUDriver`` over ``GATTDFUTransport``) on the other end, a reconnect after every lost link
/// (journal-based resume, as the CLI does), the buttonless jump when the device comes up in application mode, and a
/// skip of a system part refused as already present. Deterministic for a fault plan; no wall-clock assertions.
enum Campaign {
    static let reference: [String: DeviceProfile] = {
        var profiles: [String: DeviceProfile] = [:]
        for name in ["bracelet", "sensor"] {
            let url = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/\(name).json")
            if let data = try? Data(contentsOf: url), let profile = try? JSONDecoder().decode(DeviceProfile.self, from: data) {
                profiles[name] = profile
            }
        }
        return profiles
    }()

    /// A reference profile with time taken out of the model (every modelled duration is zero).
    static func profile(_ name: String, saveProgress: Bool? = nil) throws -> DeviceProfile {
        var profile = try #require(reference[name], "Firmware/\(name).json missing or unreadable")
        profile.speedup = .infinity
        if let saveProgress { profile.saveProgress = saveProgress }
        return profile
    }

    static func package(_ path: String) throws -> FirmwarePackage {
        try FirmwarePackage(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent(path))
    }

    /// Parts in sending order (system first), as `bledfu flash` sends them.
    static func parts(_ package: FirmwarePackage) -> [DFUPart] {
        (package.parts.filter { $0.kind != .application } + package.parts.filter { $0.kind == .application })
            .map(DFUPart.init)
    }

    /// Runs the whole package against `device`. `maxEpisodes` bounds the reconnects (a run that needs more fails).
    static func flash(
        _ parts: [DFUPart], on device: VirtualDevice, pacing: String = "adaptive", maxAttempts: Int = 3,
        timeout: Duration = .seconds(5), maxEpisodes: Int = 40
    ) async throws -> CampaignOutcome {
        var outcome = CampaignOutcome()
        let store = InMemoryJournalStore()
        var journal = DFUJournal(deviceAddress: device.profile.address.description, packageSHA256: "campaign")
        var partIndex = 0
        var episodes = 0
        var unconfirmed = false
        while partIndex < parts.count {
            let (client, server) = try SeqPacketBearer.makePair()
            let serving = Task { await device.serve(server) }
            let att = ATTClient(bearer: client)
            let gatt = GATTClient(att: att)
            defer { serving.cancel() }
            do {
                _ = try await att.exchangeMTU()
                if await device.mode == .application {
                    if unconfirmed {
                        // The last Execute went unacknowledged and the device runs its application: it took effect.
                        unconfirmed = false
                        partIndex += 1
                        journal = DFUJournal(
                            deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256, partIndex: partIndex)
                        await att.close()
                        await serving.value
                        continue
                    }
                    try await jump(gatt, att: att)
                    await serving.value
                    continue
                }
                if unconfirmed {
                    // Still in the bootloader: the last Execute never arrived; that was a lost link after all.
                    outcome.disconnects += 1
                    unconfirmed = false
                }
                let inner = try await GATTDFUTransport.open(client: gatt)
                let transport = CountingTransport(inner, counts: outcome.counts)
                let configuration = SecureDFUConfiguration(
                    pacing: try PacingPolicies.parse(pacing), maxAttempts: maxAttempts, checkpointTimeout: timeout)
                let driver = SecureDFUDriver(
                    transport: transport, clock: ContinuousClock(), configuration: configuration, journalStore: store)
                defer { outcome.counts = transport.counts.withLock { $0 } }
                do {
                    _ = try await driver.run(
                        part: parts[partIndex], partIndex: partIndex, partCount: parts.count, journal: journal)
                    partIndex += 1
                    journal = DFUJournal(
                        deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256, partIndex: partIndex)
                } catch let error where error.code == .executeUnconfirmed {
                    unconfirmed = true
                } catch let error where [.disconnected, .timeout, .transport].contains(error.code) {
                    outcome.disconnects += 1
                    journal = try await store.load(deviceAddress: journal.deviceAddress, packageSHA256: "campaign") ?? journal
                } catch let error where partIndex < parts.count - 1 && alreadyPresent(error) {
                    outcome.skippedParts.append(parts[partIndex].name)
                    partIndex += 1
                    journal = DFUJournal(
                        deviceAddress: journal.deviceAddress, packageSHA256: journal.packageSHA256, partIndex: partIndex)
                } catch {
                    outcome.failure = error
                }
            } catch {
                // The link went before the engine ran (MTU exchange, discovery, the jump).
                outcome.disconnects += 1
            }
            await att.close()
            await serving.value
            if outcome.failure != nil { break }
            episodes += 1
            if episodes > maxEpisodes + parts.count * 2 {
                outcome.failure = DFUEngineError(.gaveUp, "campaign: more than \(maxEpisodes) connections")
                break
            }
        }
        outcome.state = await device.state()
        return outcome
    }

    /// Runs `count` jobs, at most `width` at a time (the links are latency-bound), results in job order.
    static func concurrently<T: Sendable>(
        _ count: Int, width: Int = 6, _ body: @escaping @Sendable (Int) async throws -> T
    ) async throws -> [T] {
        try await withThrowingTaskGroup(of: (Int, T).self) { group in
            var results = [T?](repeating: nil, count: count)
            var next = 0
            while next < min(width, count) {
                let index = next
                group.addTask { (index, try await body(index)) }
                next += 1
            }
            while let (index, value) = try await group.next() {
                results[index] = value
                if next < count {
                    let job = next
                    group.addTask { (job, try await body(job)) }
                    next += 1
                }
            }
            return results.compactMap { $0 }
        }
    }

    static func alreadyPresent(_ error: DFUEngineError) -> Bool {
        guard error.code == .remote, case .extended(let ext)? = error.status else { return false }
        return ext == .firmwareAlreadyPresent || ext == .firmwareVersionFailure
    }

    /// The buttonless jump, as the CLI does it (8EC90003/4: indications on, `01`, the device drops the link).
    static func jump(_ gatt: GATTClient, att: ATTClient) async throws {
        let service = try #require(try await gatt.discoverPrimaryServices(uuid: SecureDFUUUID.service).first)
        let characteristics = try await gatt.discoverCharacteristics(of: service)
        var buttonless = try #require(
            characteristics.first {
                $0.uuid == SecureDFUUUID.buttonlessWithoutBonds || $0.uuid == SecureDFUUUID.buttonlessWithBonds
            })
        buttonless.descriptors = try await gatt.discoverDescriptors(of: buttonless)
        try await gatt.setIndications(true, of: buttonless)
        try? await gatt.write(handle: buttonless.valueHandle, value: ButtonlessRequest.enterBootloader.encoded)
        _ = await att.disconnected()
    }

    /// What the device must hold after `part` is installed: (installed slot, SHA-256) pairs.
    static func expectedImages(_ part: PackagePart) -> [(slot: String, sha256: String)] {
        switch part.firmwareType {
        case .application, .externalApplication: return [("application", DFUSimulatorDigest.sha256Hex(part.image))]
        case .softdevice: return [("softdevice", DFUSimulatorDigest.sha256Hex(part.image))]
        case .bootloader: return [("bootloader", DFUSimulatorDigest.sha256Hex(part.image))]
        default:
            let sdSize = Int(part.initCommand?.sdSize ?? part.manifestSDSize ?? 0)
            return [
                ("softdevice", DFUSimulatorDigest.sha256Hex(Array(part.image.prefix(sdSize)))),
                ("bootloader", DFUSimulatorDigest.sha256Hex(Array(part.image.dropFirst(sdSize)))),
            ]
        }
    }

    static func installed(_ state: DeviceState?, slot: String) -> String? {
        switch slot {
        case "application": state?.installed.application?.sha256
        case "softdevice": state?.installed.softdevice?.sha256
        default: state?.installed.bootloader.sha256
        }
    }

    /// Every image of `package` is on the device, byte for byte (by SHA-256).
    static func holds(_ package: FirmwarePackage, _ outcome: CampaignOutcome, skipping: [String] = []) -> Bool {
        package.parts.filter { !skipping.contains($0.kind.description) }.allSatisfy { part in
            expectedImages(part).allSatisfy { installed(outcome.state, slot: $0.slot) == $0.sha256 }
        }
    }
}

@Suite(.timeLimit(.minutes(5))) struct CampaignHarnessTests {
    /// The harness itself: a clean update over a socketpair installs the image, sends it once, needs no reconnect.
    @Test func cleanUpdateSendsEveryByteOnce() async throws {
        let package = try Campaign.package("Firmware/samples/bracelet-app-v2.zip")
        let device = VirtualDevice(profile: try Campaign.profile("bracelet"), clock: ContinuousClock())
        let outcome = try await Campaign.flash(Campaign.parts(package), on: device)
        #expect(outcome.succeeded, "\(outcome)")
        let holds = Campaign.holds(package, outcome)
        #expect(holds, "\(outcome)")
        #expect(outcome.disconnects == 0)
        #expect(outcome.counts.dataBytes == package.parts[0].image.count)
        #expect(outcome.counts.initBytes == package.parts[0].initPacketBytes.count)
        #expect(outcome.state?.mode == .application)
    }
}
