import ArgumentParser
import BLECore
import Batch
import Bench
import Foundation
import SimulatorHost

/// `bledfu bench batch`: wall time of N virtual devices flashed in parallel by `bledfu batch`'s scheduler against
/// one device alone (issue #6; goal: at most 1.3x). Each run gets a fresh simulator, so every device starts at
/// application version 1.
struct BenchBatch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Time a batch of N virtual devices flashed in parallel against one device alone (goal: at most 1.3x).",
        discussion: """
            Starts `bledfu simulate` with one device, flashes it through the batch scheduler (probe, full \
            `bledfu flash`, probe), then does the same with N devices at once, and prints both wall times and \
            their ratio. Exit 55 when --max-ratio is given and the ratio is larger.
            """)

    @Option(name: .long, help: "How many devices run in parallel.") var devices = 16
    @Option(name: .long, help: "The device profile (bracelet or sensor); its sample package v2 is flashed.") var profile = "bracelet"
    @Option(name: .long, help: ArgumentHelp("Divide the simulator's air and flash times by K.", valueName: "k")) var speedup: Double = 2
    @Option(name: .long, help: "Links at once (default: one per device, at most the controller's links).") var connections: Int?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The adapter's controller (docs/simulator.md): its links share its air and it carries at most its links "
                + "(PRESET[:links=N,...] as for `simulate --controller`); every virtual adapter has one.",
            valueName: "profile")) var controller = "generic:links=64"

    @Option(name: .long, help: ArgumentHelp("Fail (exit 55) when parallel/single exceeds this.", valueName: "ratio")) var maxRatio: Double?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Devices per hour for a grid of one adapter: DEVICES[,DEVICES...]:LINKS[,LINKS...] (LINKS a number or auto), "
                + "each cell a measured run beside the shared-air model's bound (docs/benchmarks.md).",
            valueName: "grid")) var grid: String?
    @Option(
        name: .long,
        help: ArgumentHelp("With --grid: adapters per cell, each with its own controller and air (default 1).", valueName: "n[,n...]"))
    var gridAdapters = "1"
    @Option(
        name: .long,
        help: ArgumentHelp("With --grid: the device profiles to measure (default: --profile).", valueName: "profile[,profile...]"))
    var gridProfiles: String?
    @Option(
        name: .long,
        help: ArgumentHelp("With --grid: runs per cell (1-9); a cell's time is their median.", valueName: "n"))
    var gridRuns = BatchGrid.defaultRuns
    @Flag(name: .long, help: "Print one JSON object.") var json = false
    @Option(name: .long, help: .hidden) var bledfu: String?

    func validate() throws {
        guard (1...64).contains(devices) else { throw ValidationError("--devices must be 1 to 64") }
        guard speedup > 0, speedup.isFinite else { throw ValidationError("--speedup must be positive") }
        if let connections, connections < 1 { throw ValidationError("--connections must be at least 1") }
        guard BatchGrid.profileNames.contains(profile) else { throw ValidationError("--profile must be bracelet or sensor") }
        _ = try controllerProfile()
        _ = try parsedGrid()
    }

    /// `--grid` with `--grid-adapters` and `--grid-profiles` (nil without `--grid`).
    func parsedGrid() throws(ValidationError) -> BatchGrid? {
        guard let grid else { return nil }
        do throws(BenchError) {
            return try BatchGrid(parsing: grid, adapters: gridAdapters, profiles: gridProfiles ?? profile, runs: gridRuns)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The adapter's controller (every virtual adapter has one since issue 21: `none`, the old model where every
    /// link had its own air, is gone).
    func controllerProfile() throws(ValidationError) -> ControllerProfile {
        guard controller != "none" else {
            throw ValidationError("--controller none is gone: every virtual adapter has a controller (docs/virtual-radio.md §4.2)")
        }
        do throws(ControllerProfileError) {
            return try ControllerProfile(parsing: controller)
        } catch {
            throw ValidationError("--controller: \(error.reason)")
        }
    }

    /// The options as the `Bench` module's ``BatchBench`` (the children run `--bledfu`, else this executable).
    func bench(catalog: ProfileCatalog) throws -> BatchBench {
        guard let firmware = catalog.directory else {
            throw CLIError(BenchError(.noFirmware, "no Firmware/ directory (set BLEDFU_FIRMWARE_DIR)"))
        }
        return BatchBench(
            executable: BatchRun.executable(bledfu), firmware: firmware, speedup: speedup, controllerSpec: controller,
            controller: try controllerProfile(), connections: connections, makeAdapter: makeFlashAdapter)
    }

    func run() async throws {
        if let grid = try parsedGrid() {
            try await runGrid(grid)
            return
        }
        let result = try await measureBoth()
        let ratio = result.ratio
        if json {
            let object: [String: any Sendable] = [
                "profile": profile, "devices": devices, "speedup": speedup, "singleSeconds": (result.single * 1000).rounded() / 1000,
                "parallelSeconds": (result.parallel * 1000).rounded() / 1000, "ratio": (ratio * 1000).rounded() / 1000, "goal": 1.3,
                "goalMet": ratio <= 1.3, "controller": controller,
            ]
            Console.json(object)
        } else {
            print(
                String(
                    format: "1 device: %.2f s; %d devices in parallel: %.2f s; ratio %.2fx (goal <= 1.30x: %@); controller %@",
                    result.single, devices, result.parallel, ratio, ratio <= 1.3 ? "met" : "missed", controller))
        }
        if let maxRatio, ratio > maxRatio {
            throw CLIError(String(format: "ratio %.2f exceeds --max-ratio %.2f", ratio, maxRatio), exitCode: BatchExit.benchGoalMissed)
        }
    }

    /// Wall times of one device alone and of `devices` devices at once, in seconds (``BatchBench/compare(_:devices:)``).
    func measureBoth() async throws -> BatchBench.Comparison {
        let catalog = SimulatorProfiles.catalog
        let bench = try bench(catalog: catalog)
        do throws(BenchError) {
            return try await bench.compare(try BatchBenchProfile.load(profile, catalog: catalog), devices: devices)
        } catch {
            throw CLIError(error)
        }
    }
}
