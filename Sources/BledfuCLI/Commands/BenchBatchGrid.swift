import Bench
import Foundation

extension BenchBatch {
    /// `--grid`: the `Bench` module measures every cell (``BatchBench/measureGrid(_:catalog:progress:)``); this
    /// prints each profile's single device and each cell as it comes, or one JSON object at the end.
    func runGrid(_ grid: BatchGrid) async throws {
        let catalog = SimulatorProfiles.catalog
        let bench = try bench(catalog: catalog)
        let report: BatchGridReport
        do throws(BenchError) {
            report = try await bench.measureGrid(grid, catalog: catalog) { progress in
                guard !json else { return }
                switch progress {
                case .single(let single):
                    print(
                        String(
                            format: "%@: one device %.2f s (median of %@ s; %.2f s besides its image on the air)", single.profile,
                            single.seconds, single.runs.map { String(format: "%.2f", $0) }.joined(separator: ", "), single.fixedSeconds))
                case .cell(let cell):
                    print(Self.gridLine(cell))
                }
            }
        } catch {
            throw CLIError(error)
        }
        if json {
            Console.jsonLine(report)
        } else {
            print(String(format: "speedup %g, controller %@", speedup, controller))
        }
    }

    /// One cell: its time (with several runs, their median and the spread), its rate, the bound and the air alone.
    static func gridLine(_ cell: BatchGridCell) -> String {
        let spread = cell.runs.count > 1
            ? String(format: " (median of %d, %.2f-%.2f)", cell.runs.count, cell.runs.min() ?? 0, cell.runs.max() ?? 0) : ""
        return String(
            format: "%@, %d adapter(s), %3d devices, links %@ (%d each): %7.2f s%@, %7.0f devices/h; model bound %7.0f/h (%3.0f %%), "
                + "air alone %7.0f/h",
            cell.profile, cell.adapters, cell.devices, cell.links, cell.connections, cell.seconds, spread, cell.devicesPerHour,
            cell.boundPerHour, cell.ofBound * 100, cell.airBoundPerHour)
    }
}
