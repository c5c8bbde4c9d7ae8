import BLECore
import Batch
import DFUSimulator
import SimulatorHost

/// `bledfu bench batch --grid DEVICES:LINKS`: which cells to measure (docs/benchmarks.md "Devices per hour").
public struct BatchGrid: Sendable, Equatable {
    public enum Links: Sendable, Equatable, CustomStringConvertible {
        case count(Int)
        /// The adapter's controller's own limit (`connections: auto`).
        case auto

        public var description: String {
            switch self {
            case .count(let count): "\(count)"
            case .auto: "auto"
            }
        }
    }

    public var devices: [Int]
    public var links: [Links]
    /// Adapters per cell (each its own controller and air).
    public var adapters: [Int] = [1]
    public var profiles: [String] = ["bracelet"]
    /// Runs per cell; a cell's time is their median. On a 2-core host one run of a 1.5 s job varies by a fifth (a
    /// sensor cell read 78 % of its bound in one run and 90-97 % in others), so one run says more about the host
    /// than about the scheduler.
    public var runs = BatchGrid.defaultRuns

    public static let defaultRuns = 3

    /// The profiles the batch bench flashes (each has a sample package v2 in the Firmware directory).
    public static let profileNames = ["bracelet", "sensor"]

    /// "8:1,2,4,auto", "4,8:auto"; adapters "1,2"; profiles "bracelet,sensor"; 1-9 runs per cell. Throws
    /// ``BenchError/Code/invalidGrid``.
    public init(parsing text: String, adapters: String, profiles: String, runs: Int = BatchGrid.defaultRuns) throws(BenchError) {
        try self.init(parsing: text)
        guard (1...9).contains(runs) else { throw BenchError(.invalidGrid, "--grid-runs must be 1 to 9, not \(runs)") }
        self.runs = runs
        var counts: [Int] = []
        for item in adapters.split(separator: ",") {
            guard let count = Int(item), (1...8).contains(count) else {
                throw BenchError(.invalidGrid, "--grid-adapters: adapters must be 1 to 8, not '\(item)'")
            }
            counts.append(count)
        }
        let names = profiles.split(separator: ",").map(String.init)
        for name in names where !Self.profileNames.contains(name) {
            throw BenchError(.invalidGrid, "--grid-profiles: '\(name)' is not bracelet or sensor")
        }
        guard !counts.isEmpty, !names.isEmpty else {
            throw BenchError(.invalidGrid, "--grid-adapters and --grid-profiles need a value each")
        }
        self.adapters = counts
        self.profiles = names
    }

    /// "8:1,2,4,auto", "4,8:auto". Throws ``BenchError/Code/invalidGrid``.
    public init(parsing text: String) throws(BenchError) {
        let halves = text.split(separator: ":", omittingEmptySubsequences: false)
        guard halves.count == 2 else {
            throw BenchError(.invalidGrid, "--grid '\(text)': expected DEVICES:LINKS, e.g. 8:1,2,4,auto")
        }
        var devices: [Int] = []
        for item in halves[0].split(separator: ",") {
            guard let count = Int(item), (1...64).contains(count) else {
                throw BenchError(.invalidGrid, "--grid: devices must be 1 to 64, not '\(item)'")
            }
            devices.append(count)
        }
        var links: [Links] = []
        for item in halves[1].split(separator: ",") {
            if item == "auto" {
                links.append(.auto)
            } else if let count = Int(item), (1...64).contains(count) {
                links.append(.count(count))
            } else {
                throw BenchError(.invalidGrid, "--grid: links must be 1 to 64 or auto, not '\(item)'")
            }
        }
        guard !devices.isEmpty, !links.isEmpty else { throw BenchError(.invalidGrid, "--grid '\(text)': no devices or no links") }
        self.devices = devices
        self.links = links
    }
}

/// One measured cell of the grid beside the shared-air model's bound.
public struct BatchGridCell: Encodable, Sendable, Equatable {
    public var profile: String
    public var adapters: Int
    public var devices: Int
    public var links: String
    public var connections: Int
    public var seconds: Double
    public var devicesPerHour: Double
    /// The model: waves of up to `adapters * connections` devices spread evenly over the adapters, each device the
    /// single device's fixed time (probe, jump, process start) plus its image at its share of its adapter's air, at
    /// most its flash rate.
    public var boundPerHour: Double
    /// The air alone (no fixed time): every byte at the aggregate rate of the adapters the devices use.
    public var airBoundPerHour: Double
    public var ofBound: Double
    /// Every run's seconds, in order (``seconds`` is their median).
    public var runs: [Double]

    public init(
        profile: String, adapters: Int, devices: Int, links: String, connections: Int, seconds: Double, devicesPerHour: Double,
        boundPerHour: Double, airBoundPerHour: Double, ofBound: Double, runs: [Double] = []
    ) {
        self.profile = profile
        self.adapters = adapters
        self.devices = devices
        self.links = links
        self.connections = connections
        self.seconds = seconds
        self.devicesPerHour = devicesPerHour
        self.boundPerHour = boundPerHour
        self.airBoundPerHour = airBoundPerHour
        self.ofBound = ofBound
        self.runs = runs
    }
}

/// `--grid --json`: one object.
public struct BatchGridReport: Encodable, Sendable {
    /// One device alone, per profile: its wall time and the part of it besides its image on the air.
    public struct Single: Encodable, Sendable, Equatable {
        public var profile: String
        /// The median of the single device's runs.
        public var seconds: Double
        public var fixedSeconds: Double
        /// Every run of the single device, in order.
        public var runs: [Double] = []
    }

    public var event = "bench-batch-grid"
    public var speedup: Double
    public var controller: String
    public var singles: [Single]
    public var cells: [BatchGridCell]
}

/// What a grid run reports as it goes (a profile's single device, then each cell).
public enum BatchGridProgress: Sendable {
    case single(BatchGridReport.Single)
    case cell(BatchGridCell)
}

extension BatchBench {
    /// Runs of the single device per profile; its median sets the bound.
    static let singleRuns = 3

    /// The median (the mean of the middle two for an even count); 0 for none.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// Measures every cell of `grid` (a fresh simulator each): profiles (loaded from `catalog` in turn) x adapters x
    /// devices x links per adapter, each the median of `grid.runs` runs beside the shared-air model's bound; `progress`
    /// hears each result at once.
    public func measureGrid(
        _ grid: BatchGrid, catalog: ProfileCatalog, progress: (BatchGridProgress) -> Void
    ) async throws(BenchError) -> BatchGridReport {
        var cells: [BatchGridCell] = []
        var singles: [BatchGridReport.Single] = []
        for name in grid.profiles {
            let profile = try BatchBenchProfile.load(name, catalog: catalog)
            // The single device sets every cell's bound (its fixed time): the median of three runs, not one run
            // (a sensor's 1.4 s run varied by 0.4 s from run to run, moving each bound by a quarter).
            var runs: [Double] = []
            for _ in 0..<Self.singleRuns { runs.append(try await measure(profile, count: 1, links: 1)) }
            let single = Self.median(runs)
            let model = GridModel(bench: self, profile: profile, singleSeconds: single)
            let report = BatchGridReport.Single(profile: name, seconds: single, fixedSeconds: model.fixed, runs: runs)
            singles.append(report)
            progress(.single(report))
            for adapters in grid.adapters {
                for devices in grid.devices {
                    for links in grid.links {
                        let wanted: Int
                        switch links {
                        case .count(let count): wanted = count
                        case .auto: wanted = controller.maximumLinks
                        }
                        let connections = max(1, min(wanted, devices, controller.maximumLinks))
                        var runs: [Double] = []
                        for _ in 0..<max(1, grid.runs) {
                            runs.append(try await measure(profile, count: devices, links: connections, adapters: adapters))
                        }
                        var cell = model.cell(
                            adapters: adapters, devices: devices, links: links, connections: connections, seconds: Self.median(runs))
                        cell.runs = runs
                        cells.append(cell)
                        progress(.cell(cell))
                    }
                }
            }
        }
        return BatchGridReport(speedup: speedup, controller: controllerSpec, singles: singles, cells: cells)
    }
}

/// The shared-air model of one profile's cells: its link model's rates on the controller (times the speedup), and
/// the single device's fixed time (what it costs besides its image on the air: probe, jump, process start).
struct GridModel {
    var profile: String
    var bytes: Double
    var model: LinkModel
    var eventLengthMicros: Double?
    var speedup: Double
    var fixed: Double

    init(bench: BatchBench, profile: BatchBenchProfile, singleSeconds: Double) {
        self.profile = profile.name
        bytes = Double(profile.package.totalBytes)
        model = LinkModel(profile: profile.device)
        eventLengthMicros = bench.controller.eventLengthMicros
        speedup = bench.speedup
        fixed = 0
        fixed = max(0, singleSeconds - bytes / max(rate(1).perLink, 1))
    }

    func rate(_ links: Int) -> (perLink: Double, aggregate: Double) {
        let estimate = SharedAir.estimate(model: model, links: links, eventLengthMicros: eventLengthMicros)
        return (estimate.perLink * speedup, estimate.aggregate * speedup)
    }

    /// A measured cell beside the bound: waves of up to `adapters * connections` devices, spread evenly over the
    /// adapters as the scheduler spreads them (each adapter carries its share of a wave, at most `connections`), each
    /// device the fixed time plus its image at its link's share of its adapter's air. (12 devices on 2 adapters of
    /// 12 links are 6 links per adapter, not 12 on one air: counting them so put the bound below what was measured.)
    func cell(adapters: Int, devices: Int, links: BatchGrid.Links, connections: Int, seconds: Double) -> BatchGridCell {
        let adapters = max(1, adapters)
        let devices = max(1, devices)  // the grid's cells have 1-64 devices; never a bound of 0/0
        let perWave = adapters * max(1, connections)
        var boundSeconds = 0.0
        var left = devices
        while left > 0 {
            let wave = min(left, perWave)
            let perAdapter = (wave + adapters - 1) / adapters
            boundSeconds += fixed + bytes / max(rate(perAdapter).perLink, 1)
            left -= wave
        }
        // The first wave's links on each adapter, and only the adapters it uses (3 devices on 4 adapters use 3).
        let used = min(adapters, devices)
        let shared = rate(min(max(1, connections), (devices + used - 1) / used))
        return BatchGridCell(
            profile: profile, adapters: adapters, devices: devices, links: links.description, connections: connections,
            seconds: seconds, devicesPerHour: Double(devices) * 3600 / seconds, boundPerHour: Double(devices) * 3600 / boundSeconds,
            airBoundPerHour: 3600 * Double(used) * shared.aggregate / bytes, ofBound: boundSeconds / seconds)
    }
}
