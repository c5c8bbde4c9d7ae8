import BLECore
import Batch
import Foundation
import SimulatorHost
import Testing

@testable import Bench

/// `bledfu bench batch --grid`'s cells as the options name them, and the shared-air model each measured cell is set
/// beside (the measurement itself is the bench's, never a timed test: docs/benchmarks.md "Batch: devices per hour").
@Suite(.timeLimit(.minutes(2))) struct BatchGridTests {
    static let firmware = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Firmware")

    @Test func gridNamesDevicesAndLinks() throws {
        let grid = try BatchGrid(parsing: "4,8:1,2,auto")
        #expect(grid.devices == [4, 8])
        #expect(grid.links == [.count(1), .count(2), .auto])
        #expect(grid.links.map(\.description) == ["1", "2", "auto"])
    }

    @Test(arguments: ["8", "0:1", "8:0", "8:65", "8:some", ":1", "8:", "a:1"])
    func aBadGridIsAnInvalidGrid(_ text: String) {
        #expect(throws: BenchError(.invalidGrid, "")) { try BatchGrid(parsing: text) }
    }

    @Test func theGridSpansAdaptersAndProfiles() throws {
        let grid = try BatchGrid(parsing: "8:2,auto", adapters: "1,2", profiles: "bracelet,sensor")
        #expect(grid.adapters == [1, 2])
        #expect(grid.profiles == ["bracelet", "sensor"])
        #expect(throws: BenchError(.invalidGrid, "")) { try BatchGrid(parsing: "8:2", adapters: "0", profiles: "bracelet") }
        #expect(throws: BenchError(.invalidGrid, "")) { try BatchGrid(parsing: "8:2", adapters: "1", profiles: "watch") }
    }

    /// Each cell is the median of several runs (3 unless `--grid-runs` says otherwise, 1 to 9).
    @Test func cellsAreMeasuredSeveralTimes() throws {
        #expect(try BatchGrid(parsing: "8:2", adapters: "1", profiles: "bracelet").runs == 3)
        #expect(try BatchGrid(parsing: "8:2", adapters: "1", profiles: "bracelet", runs: 5).runs == 5)
        #expect(throws: BenchError(.invalidGrid, "")) { try BatchGrid(parsing: "8:2", adapters: "1", profiles: "bracelet", runs: 0) }
        #expect(throws: BenchError(.invalidGrid, "")) { try BatchGrid(parsing: "8:2", adapters: "1", profiles: "bracelet", runs: 10) }
    }

    /// The single device's time is the median of its runs: one slow or fast run does not move every bound.
    @Test func theSingleDeviceIsTheMedianOfItsRuns() {
        #expect(BatchBench.singleRuns >= 3)
        #expect(BatchBench.median([1.41, 1.86, 1.43]) == 1.43)
        #expect(BatchBench.median([2, 1]) == 1.5)
        #expect(BatchBench.median([]) == 0)
    }

    /// The bound of a cell: waves of up to adapters x links devices spread evenly over the adapters, each the single
    /// device's fixed time plus its image at its link's share of its adapter's air (SharedAir on the controller),
    /// times the speedup.
    @Test func aCellIsSetBesideTheSharedAirBound() throws {
        let profile = try BatchBenchProfile.load("bracelet", catalog: ProfileCatalog(directory: Self.firmware, builtIn: [:]))
        let bench = BatchBench(
            executable: URL(fileURLWithPath: "/bin/false"), firmware: Self.firmware, speedup: 2, controllerSpec: "generic:links=4",
            controller: try ControllerProfile(parsing: "generic:links=4")) { _ in throw BenchError(.scratch, "no adapter in this test") }
        let model = GridModel(bench: bench, profile: profile, singleSeconds: 1000)
        let bytes = Double(profile.package.totalBytes)
        #expect(model.fixed == 1000 - bytes / model.rate(1).perLink)
        let cell = model.cell(adapters: 2, devices: 10, links: .auto, connections: 2, seconds: 500)
        // 10 devices on 2 adapters x 2 links: waves of 4, 4 and 2; the last has one link per adapter.
        let bound = 2 * (model.fixed + bytes / model.rate(2).perLink) + (model.fixed + bytes / model.rate(1).perLink)
        #expect(abs(cell.boundPerHour - 10 * 3600 / bound) < 1e-9)
        #expect(abs(cell.ofBound - bound / 500) < 1e-9)
        #expect(cell.devicesPerHour == 72)
        #expect(abs(cell.airBoundPerHour - 3600 * 2 * model.rate(2).aggregate / bytes) < 1e-9)
        #expect(cell.links == "auto" && cell.connections == 2)
        // 12 devices on 2 adapters of 12 links: one wave of 6 links on each adapter's air, not 12 on one (with that
        // bound the measured cells read 107 % (sensor) and 120 % (bracelet) of it).
        let spread = model.cell(adapters: 2, devices: 12, links: .auto, connections: 12, seconds: 500)
        let one = model.fixed + bytes / model.rate(6).perLink
        #expect(abs(spread.boundPerHour - 12 * 3600 / one) < 1e-9)
        #expect(model.rate(6).perLink > model.rate(12).perLink)
        #expect(abs(spread.airBoundPerHour - 3600 * 2 * model.rate(6).aggregate / bytes) < 1e-9)
        // Fewer devices than adapters: one link on each of the three adapters used; the fourth adds no air.
        let few = model.cell(adapters: 4, devices: 3, links: .count(2), connections: 2, seconds: 500)
        #expect(abs(few.boundPerHour - 3 * 3600 / (model.fixed + bytes / model.rate(1).perLink)) < 1e-9)
        #expect(abs(few.airBoundPerHour - 3600 * 3 * model.rate(1).aggregate / bytes) < 1e-9)
    }
}
