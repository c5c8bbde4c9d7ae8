import ArgumentParser
import Foundation
import Testing

@testable import BledfuCLI

/// `bledfu bench batch --grid`: the grid's cells as the option names them (the measurement itself is the bench's,
/// never a timed test: docs/benchmarks.md "Batch: devices per hour").
@Suite(.timeLimit(.minutes(2))) struct BenchBatchGridTests {
    @Test func gridNamesDevicesAndLinks() throws {
        let grid = try BatchGrid(parsing: "4,8:1,2,auto")
        #expect(grid.devices == [4, 8])
        #expect(grid.links == [.count(1), .count(2), .auto])
        #expect(grid.links.map(\.description) == ["1", "2", "auto"])
        let command = try BenchBatch.parse(["--grid", "6:auto", "--speedup", "4"])
        #expect(command.grid == "6:auto")
    }

    @Test(arguments: ["8", "0:1", "8:0", "8:65", "8:some", ":1", "8:", "a:1"])
    func aBadGridIsAUsageError(_ text: String) {
        #expect(throws: ValidationError.self) { try BatchGrid(parsing: text) }
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--grid", text]) }
    }

    @Test func aCellLineSaysRateBoundAndShare() {
        let cell = BatchGridCell(
            profile: "bracelet", adapters: 2, devices: 6, links: "auto", connections: 3, seconds: 7.43, devicesPerHour: 2909,
            boundPerHour: 4980, airBoundPerHour: 14398, ofBound: 0.584)
        let line = BenchBatch.gridLine(cell)
        #expect(line.contains("bracelet, 2 adapter(s),   6 devices, links auto (3 each)"), "\(line)")
        #expect(line.contains("2909 devices/h") && line.contains("4980/h") && line.contains("58 %"), "\(line)")
    }

    @Test func theGridSpansAdaptersAndProfiles() throws {
        let grid = try BatchGrid(parsing: "8:2,auto", adapters: "1,2", profiles: "bracelet,sensor")
        #expect(grid.adapters == [1, 2])
        #expect(grid.profiles == ["bracelet", "sensor"])
        #expect(throws: ValidationError.self) { try BatchGrid(parsing: "8:2", adapters: "0", profiles: "bracelet") }
        #expect(throws: ValidationError.self) { try BatchGrid(parsing: "8:2", adapters: "1", profiles: "watch") }
        let command = try BenchBatch.parse(["--grid", "8:auto", "--grid-adapters", "1,2", "--grid-profiles", "bracelet,sensor"])
        #expect(command.gridAdapters == "1,2")
        #expect(command.gridProfiles == "bracelet,sensor")
    }
}
