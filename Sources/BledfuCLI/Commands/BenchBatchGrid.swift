import ArgumentParser
import BLECore
import DFUSimulator
import Batch
import Foundation

/// `bledfu bench batch --grid DEVICES:LINKS`: which cells to measure (docs/benchmarks.md "Devices per hour").
struct BatchGrid: Sendable, Equatable {
    enum Links: Sendable, Equatable, CustomStringConvertible {
        case count(Int)
        /// The adapter's controller's own limit (`connections: auto`).
        case auto

        var description: String {
            switch self {
            case .count(let count): "\(count)"
            case .auto: "auto"
            }
        }
    }

    var devices: [Int]
    var links: [Links]
    /// Adapters per cell (each its own controller and air).
    var adapters: [Int] = [1]
    var profiles: [String] = ["bracelet"]

    /// "8:1,2,4,auto", "4,8:auto"; adapters "1,2"; profiles "bracelet,sensor".
    init(parsing text: String, adapters: String, profiles: String) throws(ValidationError) {
        try self.init(parsing: text)
        var counts: [Int] = []
        for item in adapters.split(separator: ",") {
            guard let count = Int(item), (1...8).contains(count) else {
                throw ValidationError("--grid-adapters: adapters must be 1 to 8, not '\(item)'")
            }
            counts.append(count)
        }
        let names = profiles.split(separator: ",").map(String.init)
        for name in names where !["bracelet", "sensor"].contains(name) {
            throw ValidationError("--grid-profiles: '\(name)' is not bracelet or sensor")
        }
        guard !counts.isEmpty, !names.isEmpty else { throw ValidationError("--grid-adapters and --grid-profiles need a value each") }
        self.adapters = counts
        self.profiles = names
    }

    /// "8:1,2,4,auto", "4,8:auto".
    init(parsing text: String) throws(ValidationError) {
        let halves = text.split(separator: ":", omittingEmptySubsequences: false)
        guard halves.count == 2 else { throw ValidationError("--grid '\(text)': expected DEVICES:LINKS, e.g. 8:1,2,4,auto") }
        var devices: [Int] = []
        for item in halves[0].split(separator: ",") {
            guard let count = Int(item), (1...64).contains(count) else {
                throw ValidationError("--grid: devices must be 1 to 64, not '\(item)'")
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
                throw ValidationError("--grid: links must be 1 to 64 or auto, not '\(item)'")
            }
        }
        guard !devices.isEmpty, !links.isEmpty else { throw ValidationError("--grid '\(text)': no devices or no links") }
        self.devices = devices
        self.links = links
    }
}

/// One measured cell of the grid beside the shared-air model's bound.
struct BatchGridCell: Encodable {
    var profile: String
    var adapters: Int
    var devices: Int
    var links: String
    var connections: Int
    var seconds: Double
    var devicesPerHour: Double
    /// The model: waves of `connections` devices, each the single device's fixed time (probe, jump, process start)
    /// plus its image at its share of the adapter's air, at most its flash rate.
    var boundPerHour: Double
    /// The adapter's air alone (no fixed time): every byte at the adapter's aggregate rate.
    var airBoundPerHour: Double
    var ofBound: Double
}

extension BenchBatch {
    /// Measures every cell of `grid` (a fresh simulator each): profiles x adapters x devices x links per adapter, and
    /// prints devices per hour beside the model's bound.
    func runGrid(_ grid: BatchGrid) async throws {
        guard let firmware = SimulatorProfiles.firmwareDirectory() else {
            throw CLIError("no Firmware/ directory (set BLEDFU_FIRMWARE_DIR)", exitCode: BledfuExit.usage)
        }
        let executable = BatchRun.executable(bledfu)
        let controllerProfile = try controllerProfile() ?? .generic
        var cells: [BatchGridCell] = []
        var singles: [BatchGridReport.Single] = []
        for profile in grid.profiles {
            let info = try BatchPlanFiles.info(firmware.appendingPathComponent("samples/\(profile)-app-v2.zip").path, keys: [])
            let base = try SimulatorProfiles.load(try SimulatedDeviceRequest(parsing: profile))
            let model = LinkModel(profile: base)
            let bytes = Double(info.totalBytes)
            func rate(_ links: Int) -> (perLink: Double, aggregate: Double) {
                let estimate = SharedAir.estimate(model: model, links: links, eventLengthMicros: controllerProfile.eventLengthMicros)
                return (estimate.perLink * speedup, estimate.aggregate * speedup)
            }
            let single = try await measure(
                count: 1, base: base, info: info, firmware: firmware, executable: executable, links: 1, profile: profile)
            // What one device costs besides its image on the air: probe, jump, process start, verification.
            let fixed = max(0, single - bytes / max(rate(1).perLink, 1))
            singles.append(BatchGridReport.Single(profile: profile, seconds: single, fixedSeconds: fixed))
            if !json {
                print(String(format: "%@: one device %.2f s (%.2f s besides its image on the air)", profile, single, fixed))
            }
            for adapters in grid.adapters {
                for devices in grid.devices {
                    for links in grid.links {
                        let wanted: Int
                        switch links {
                        case .count(let count): wanted = count
                        case .auto: wanted = controllerProfile.maximumLinks
                        }
                        let connections = max(1, min(wanted, devices, controllerProfile.maximumLinks))
                        let seconds = try await measure(
                            count: devices, base: base, info: info, firmware: firmware, executable: executable, links: connections,
                            adapters: adapters, profile: profile)
                        let shared = rate(connections)
                        let waves = Double((devices + adapters * connections - 1) / (adapters * connections))
                        let boundSeconds = waves * (fixed + bytes / max(shared.perLink, 1))
                        let cell = BatchGridCell(
                            profile: profile, adapters: adapters, devices: devices, links: links.description, connections: connections,
                            seconds: seconds, devicesPerHour: Double(devices) * 3600 / seconds,
                            boundPerHour: Double(devices) * 3600 / boundSeconds,
                            airBoundPerHour: 3600 * Double(adapters) * shared.aggregate / bytes, ofBound: boundSeconds / seconds)
                        cells.append(cell)
                        if !json { print(Self.gridLine(cell)) }
                    }
                }
            }
        }
        if json {
            Console.jsonLine(BatchGridReport(speedup: speedup, controller: controller, singles: singles, cells: cells))
        } else {
            print(String(format: "speedup %g, controller %@", speedup, controller))
        }
    }

    static func gridLine(_ cell: BatchGridCell) -> String {
        String(
            format: "%@, %d adapter(s), %3d devices, links %@ (%d each): %7.2f s, %7.0f devices/h; model bound %7.0f/h (%3.0f %%), "
                + "air alone %7.0f/h",
            cell.profile, cell.adapters, cell.devices, cell.links, cell.connections, cell.seconds, cell.devicesPerHour,
            cell.boundPerHour, cell.ofBound * 100, cell.airBoundPerHour)
    }
}

/// `--grid --json`: one object.
struct BatchGridReport: Encodable {
    /// One device alone, per profile: its wall time and the part of it besides its image on the air.
    struct Single: Encodable {
        var profile: String
        var seconds: Double
        var fixedSeconds: Double
    }

    var event = "bench-batch-grid"
    var speedup: Double
    var controller: String
    var singles: [Single]
    var cells: [BatchGridCell]
}
