import ArgumentParser
import Batch
import Bench
import Foundation
import Testing

@testable import BledfuCLI

/// `bledfu bench batch --grid`: the options and the line each cell prints (the grid's parsing and model are the
/// `Bench` module's: BenchTests' BatchGridTests; the measurement itself is the bench's, never a timed test:
/// docs/benchmarks.md "Batch: devices per hour").
@Suite(.timeLimit(.minutes(2))) struct BenchBatchGridTests {
    @Test func gridNamesDevicesAndLinks() throws {
        let command = try BenchBatch.parse(["--grid", "6:auto", "--speedup", "4"])
        #expect(command.grid == "6:auto")
        #expect(try command.parsedGrid() == BatchGrid(parsing: "6:auto", adapters: "1", profiles: "bracelet"))
    }

    @Test(arguments: ["8", "0:1", "8:0", "8:65", "8:some", ":1", "8:", "a:1"])
    func aBadGridIsAUsageError(_ text: String) {
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--grid", text]) }
    }

    /// The CLI reports a bad grid with the Bench module's message, as a usage error.
    @Test func aBadGridNamesItsValue() {
        do {
            _ = try BenchBatch.parse(["--grid", "8:2", "--grid-profiles", "watch"])
            Issue.record("--grid-profiles watch was accepted")
        } catch {
            #expect(BenchBatch.message(for: error) == "--grid-profiles: 'watch' is not bracelet or sensor")
            #expect(BenchBatch.exitCode(for: error).rawValue == BledfuExit.usage)
        }
    }

    @Test func aCellLineSaysRateBoundAndShare() {
        let cell = BatchGridCell(
            profile: "bracelet", adapters: 2, devices: 6, links: "auto", connections: 3, seconds: 7.43, devicesPerHour: 2909,
            boundPerHour: 4980, airBoundPerHour: 14398, ofBound: 0.584)
        let line = BenchBatch.gridLine(cell)
        #expect(line.contains("bracelet, 2 adapter(s),   6 devices, links auto (3 each)"), "\(line)")
        #expect(line.contains("2909 devices/h") && line.contains("4980/h") && line.contains("58 %"), "\(line)")
        #expect(!line.contains("median"), "\(line)")
        var measured = cell
        measured.runs = [7.61, 7.43, 7.40]
        #expect(BenchBatch.gridLine(measured).contains("7.43 s (median of 3, 7.40-7.61)"), "\(BenchBatch.gridLine(measured))")
    }

    @Test func gridRunsIsPassedOnAndChecked() throws {
        #expect(try BenchBatch.parse(["--grid", "8:auto"]).parsedGrid()?.runs == 3)
        #expect(try BenchBatch.parse(["--grid", "8:auto", "--grid-runs", "5"]).parsedGrid()?.runs == 5)
        #expect(throws: (any Error).self) { try BenchBatch.parse(["--grid", "8:auto", "--grid-runs", "0"]) }
    }

    @Test func theGridSpansAdaptersAndProfiles() throws {
        let command = try BenchBatch.parse(["--grid", "8:auto", "--grid-adapters", "1,2", "--grid-profiles", "bracelet,sensor"])
        #expect(command.gridAdapters == "1,2")
        #expect(command.gridProfiles == "bracelet,sensor")
        #expect(try command.parsedGrid()?.adapters == [1, 2])
        #expect(try command.parsedGrid()?.profiles == ["bracelet", "sensor"])
    }
}
