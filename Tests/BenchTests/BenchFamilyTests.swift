import DFUSimulator
import Foundation
import LegacyDFU
import MCUmgr
import Testing

@testable import Bench

/// A short bench of every family against its virtual devices (the `Bench` module's one loop), each row checked for
/// consistency: the bytes of the image, a positive bound no higher than the link's ceiling, throughput = bytes /
/// seconds, the cell's fraction = median throughput / bound, every run completed with the right image.
@Suite(.timeLimit(.minutes(5))) struct BenchFamilyTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func profile<Profile: Decodable>(_ name: String, as type: Profile.Type) throws -> Profile {
        try JSONDecoder().decode(type, from: Data(contentsOf: root.appendingPathComponent("Firmware/\(name).json")))
    }

    /// Runs `modes` once each on `target` (a generous timeout: the machine may be loaded) and checks every row.
    static func bench(_ name: String, _ target: BenchTarget, modes: [String]) async -> [BenchRun] {
        let jobs = BenchMatrix.jobs(targets: [(name, target)], modes: modes, repetitions: 1)
        #expect(jobs.map(\.mode) == modes)
        let runs = await BenchMatrix.run(jobs, parallel: 1, timeout: .seconds(30)) { _ in }
        #expect(runs.count == modes.count)
        for run in runs { checkRow(run) }
        for cell in BenchCellSummary.summarise(runs) {
            #expect(cell.runs == 1)
            #expect(cell.protocolBoundBytesPerSecond > 0)
            #expect(abs(cell.protocolBoundRatio - cell.medianBytesPerSecond / cell.protocolBoundBytesPerSecond) < 1e-9)
            #expect(cell.imagesCorrect == 1, "\(cell.mode) \(cell.profile): wrong image")
        }
        return runs
    }

    static func checkRow(_ run: BenchRun) {
        #expect(run.completed, "\(run.mode) \(run.profile): \(run.error ?? "")")
        #expect(run.imageCorrect, "\(run.mode) \(run.profile): wrong image")
        #expect(run.seconds > 0)
        #expect(abs(run.bytesPerSecond - Double(run.imageBytes) / run.seconds) < 1e-6 * run.bytesPerSecond)
        #expect(run.protocolBoundBytesPerSecond > 0)
        #expect(run.ceilingBytesPerSecond > 0)
        // The bound is the ceiling less the protocol's round trips and flash waits: never above it.
        #expect(run.protocolBoundBytesPerSecond <= run.ceilingBytesPerSecond * 1.000_001)
        #expect(run.mtu >= 23)
    }

    @Test func secureRowsAreConsistent() async throws {
        let profile = try Self.profile("bracelet", as: DeviceProfile.self)
        let runs = await Self.bench("bracelet", .secure(profile, size: 16 * 1024, speedup: 20), modes: ["adaptive", "nrfutil"])
        for run in runs {
            #expect(run.imageBytes == 16 * 1024)
            #expect(run.checkpoints > 0)
        }
    }

    @Test func legacyRowsAreConsistent() async throws {
        let profile = try Self.profile("sdk11-nrf52", as: LegacyDeviceProfile.self)
        let runs = await Self.bench("sdk11-nrf52", .legacy(profile, size: 12 * 1024, speedup: 20), modes: ["adaptive", "android"])
        for run in runs {
            #expect(run.imageBytes == 12 * 1024)
            #expect(run.mtu == 23)
        }
    }

    @Test func smpRowsAreConsistent() async throws {
        let profile = try Self.profile("smp-sensor", as: SMPDeviceProfile.self)
        let target = try BenchTarget.smp(profile, size: 24 * 1024, speedup: 20)
        let runs = await Self.bench("smp-sensor", target, modes: ["adaptive", "nordic", "mcumgr-cli"])
        for run in runs {
            #expect(run.imageBytes == 24 * 1024)
            // A clean link: bytes count as resent only with a chunk sent again (a timeout on a loaded machine), never
            // the first chunk of a clean upload (it was counted so before: 2408 bytes per run).
            #expect(
                run.bytesResent == 0 || run.failedCheckpoints > 0,
                "\(run.mode): \(run.bytesResent) bytes resent without a chunk sent again")
        }
    }

    /// Each family runs its own modes of a mixed list; a list without any of its modes runs its defaults.
    @Test func familiesPickTheirModes() throws {
        let mixed = ["adaptive", "ios", "nordic", "with-response", "prn:10"]
        #expect(SecureBench.modes(mixed) == ["adaptive", "ios", "with-response", "prn:10"])
        #expect(SMPBench.modes(mixed) == ["adaptive", "nordic"])
        #expect(SMPBench.modes(["ios"]) == SMPBench.defaultModes)
        #expect(SMPBench.modes(nil) == SMPBench.defaultModes)
        #expect(LegacyBench.modes(["with-response"]) == LegacyBench.defaultModes)
        #expect(LegacyBench.modes(nil) == ["adaptive", "ios", "android", "nrfutil"])
    }
}

/// `bench --device`: the ceiling and bound of the link a real device got, computed as for a virtual cell.
@Suite(.timeLimit(.minutes(10))) struct DeviceLinkTests {
    /// The line `bledfu flash` prints on BlueZ (`LinkTuningReport`), for the link of the `fast` profile: 2M, LL 251,
    /// 7.5 ms, 8 packets per event, not encrypted. The figures match the virtual cell's link (its flash aside).
    @Test func aReportedLinkGivesTheVirtualCellsFigures() throws {
        let fast = try BenchFamilyTests.profile("fast", as: DeviceProfile.self)
        let line = "bledfu: link: interval 7.5 ms, latency 0, timeout 4000 ms; PHY 2M/2M (tx/rx); data length 251/251 bytes (tx/rx)"
        let link = try #require(DeviceLink(reportLine: line, mtu: 247, packetsPerEvent: fast.link.packetsPerEvent))
        #expect(link.connectionIntervalMs == 7.5 && link.phy == "2M" && link.dataLength == 251)
        var run = BenchRun(mode: "adaptive", profile: "device", imageBytes: 4096, repetition: 1)
        link.fill(&run)
        let virtual = LinkModel(profile: fast)
        #expect(run.mtu == 247)
        #expect(run.ceilingBytesPerSecond == virtual.ceiling(mtu: 247).airWriteWithoutResponse)
        // The device's flash is unknown: the link's bound is at least the virtual device's (its flash costs time).
        let bound = virtual.protocolBound(mtu: 247, objectSize: fast.dataObjectMaxSize)
        #expect(run.protocolBoundBytesPerSecond >= bound)
        #expect(run.protocolBoundBytesPerSecond < run.ceilingBytesPerSecond)
    }

    @Test func aLinkWithoutFiguresGivesNone() {
        #expect(DeviceLink(reportLine: "bledfu: link: interval unchanged") == nil)
        #expect(DeviceLink(reportLine: "bledfu: link: interval 30 ms; PHY Coded/Coded (tx/rx); data length 27/27 bytes (tx/rx)") == nil)
        #expect(DeviceLink(reportLine: "flashing") == nil)
        let slow = DeviceLink(reportLine: "link: interval 45 ms; PHY 1M/1M (tx/rx); data length 27/27 bytes (tx/rx)")
        #expect(slow == DeviceLink(connectionIntervalMs: 45, phy: "1M", dataLength: 27))
    }
}
