import ArgumentParser
import BLECore
import DFUSimulator
import Batch
import Foundation
import LinuxIO

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
    @Flag(name: .long, help: "Print one JSON object.") var json = false
    @Option(name: .long, help: .hidden) var bledfu: String?

    func validate() throws {
        guard (1...64).contains(devices) else { throw ValidationError("--devices must be 1 to 64") }
        guard speedup > 0, speedup.isFinite else { throw ValidationError("--speedup must be positive") }
        if let connections, connections < 1 { throw ValidationError("--connections must be at least 1") }
        guard ["bracelet", "sensor"].contains(profile) else { throw ValidationError("--profile must be bracelet or sensor") }
        _ = try controllerProfile()
        if let grid { _ = try BatchGrid(parsing: grid, adapters: gridAdapters, profiles: gridProfiles ?? profile) }
    }

    /// The adapter's controller (every virtual adapter has one since issue 21: `none`, the old model where every
    /// link had its own air, is gone).
    func controllerProfile() throws -> ControllerProfile? {
        guard controller != "none" else {
            throw ValidationError("--controller none is gone: every virtual adapter has a controller (docs/virtual-radio.md §4.2)")
        }
        do throws(ControllerProfileError) {
            return try ControllerProfile(parsing: controller)
        } catch {
            throw ValidationError("--controller: \(error.reason)")
        }
    }

    func run() async throws {
        if let grid {
            try await runGrid(try BatchGrid(parsing: grid, adapters: gridAdapters, profiles: gridProfiles ?? profile))
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

    /// Wall times of one device alone and of `devices` devices at once, in seconds.
    func measureBoth() async throws -> (single: Double, parallel: Double, ratio: Double) {
        guard let firmware = SimulatorProfiles.firmwareDirectory() else {
            throw CLIError("no Firmware/ directory (set BLEDFU_FIRMWARE_DIR)", exitCode: BledfuExit.usage)
        }
        let package = firmware.appendingPathComponent("samples/\(profile)-app-v2.zip").path
        let info = try BatchPlanFiles.info(package, keys: [])
        let base = try SimulatorProfiles.load(try SimulatedDeviceRequest(parsing: profile))
        let executable = BatchRun.executable(bledfu)
        let single = try await measure(count: 1, base: base, info: info, firmware: firmware, executable: executable)
        let parallel = try await measure(count: devices, base: base, info: info, firmware: firmware, executable: executable)
        return (single, parallel, parallel / single)
    }

    /// One fresh simulator with `count` devices, one scheduler run over all of them; returns the wall time.
    /// `adapters` central adapters on the radio (each its own controller and air), `links` each; `profile` (default
    /// `--profile`) names the devices and their package.
    func measure(
        count: Int, base: DeviceProfile, info: PackageInfo, firmware: URL, executable: URL, links: Int? = nil, adapters: Int = 1,
        profile: String? = nil
    ) async throws -> Double {
        let profile = profile ?? self.profile
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("bledfu-bench-batch-\(UUID().uuidString.prefix(8))")
        let radio = directory.appendingPathComponent("radio")
        try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var environment = ProcessInfo.processInfo.environment
        environment["BLEDFU_FIRMWARE_DIR"] = firmware.path
        let simulator: ChildProcess
        do throws(ChildProcessError) {
            simulator = try ChildProcess.spawn(
                executable.path,
                arguments: ["simulate", "--adapter", "virtual:\(radio.path)", "--device", "\(profile):\(count)", "--speedup", "\(speedup)"]
                    + ["--controller", "default=\(controller)"],
                environment: environment, standardInput: .null, standardOutput: .null, standardError: .null)
        } catch {
            throw CLIError("cannot start the simulator: \(error.message)", exitCode: BledfuExit.failure)
        }
        do {
            let seconds = try await measure(
                count: count, info: info, base: base, radio: radio, directory: directory, executable: executable, links: links,
                adapters: adapters, profile: profile, simulator: simulator)
            await Self.stop(simulator)
            return seconds
        } catch {
            await Self.stop(simulator)
            throw error
        }
    }

    /// Ctrl-C to the simulator, then a bounded wait (then SIGKILL: ChildProcess.end).
    static func stop(_ simulator: ChildProcess) async {
        simulator.signal(SIGINT)
        _ = await simulator.end(grace: .seconds(10))
    }

    /// One scheduler run over `count` devices of the running simulator; returns the wall time.
    private func measure(
        count: Int, info: PackageInfo, base: DeviceProfile, radio: URL, directory: URL, executable: URL, links: Int?,
        adapters: Int, profile: String, simulator: ChildProcess
    ) async throws -> Double {
        for _ in 0..<3000 {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: radio.path)) ?? []
            if names.filter({ $0.hasSuffix(".adv") }).count >= count { break }
            guard simulator.exit == nil else { throw CLIError("the simulator stopped", exitCode: BledfuExit.failure) }
            await pause(seconds: 0.01)
        }
        // One adapter: the radio's default central; more: `@central1`, `@central2`... (each its own controller).
        let perAdapter = min(links ?? connections ?? count, count, (try controllerProfile())?.maximumLinks ?? count)
        var plan = BatchPlan(
            adapters: (0..<adapters).map { index in
                BatchPlan.Adapter(
                    name: "virtual:\(radio.path)" + (adapters == 1 ? "" : "@central\(index + 1)"), connections: perAdapter)
            },
            classes: [BatchPlan.DeviceClass(name: profile, package: info.path)],
            devices: (0..<count).map {
                let instance = SimulatorProfiles.instance(base, index: $0, of: count)
                return BatchPlan.ExplicitDevice(address: instance.address, addressType: instance.addressType, className: profile)
            })
        plan.policies = BatchPlan.Policies(retries: 0, skipAtTargetVersion: false)
        let log: BatchLog
        do {
            log = try await BatchLog.open(path: directory.appendingPathComponent("bench.sqlite").path)
        } catch {
            throw CLIError(error.reason, exitCode: BatchExit.databaseError)
        }
        let scheduler = BatchScheduler(
            plan: plan, packages: [profile: info],
            flasher: ProcessFlasher(
                executable: executable, stateDirectory: directory, logDirectory: directory.appendingPathComponent("logs"),
                makeAdapter: makeFlashAdapter),
            log: log, batch: "bench")
        let targets = plan.devices.map { BatchTarget(peer: PeerAddress($0.address, type: $0.addressType), className: profile) }
        let start = ContinuousClock.now
        let summary: BatchSummary
        do {
            summary = try await scheduler.run(targets: targets)
        } catch {
            throw CLIError("\(error)", exitCode: BatchExit.databaseError)
        }
        let elapsed = start.duration(to: .now)
        guard summary.done == count else {
            let errors = ((try? await log.devices()) ?? []).compactMap(\.error).prefix(3).joined(separator: "; ")
            throw CLIError("\(count - summary.done) of \(count) device(s) failed: \(errors)", exitCode: BatchExit.devicesFailed)
        }
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
