import BLECore
import Batch
import BledfuKit
import DFUCore
import DFUSimulator
import Foundation
import LinuxIO
import SimulatorHost

/// `bledfu bench batch`'s measurement (issue #6): N virtual devices flashed in parallel by the batch scheduler
/// (``BatchScheduler`` with ``ProcessFlasher``: probe, a full `bledfu flash` child per device, probe) against one
/// device alone. Each run starts a fresh `bledfu simulate` child (so every device starts at application version 1)
/// on a radio directory of its own, waits for its `ready` event, flashes every device once and returns the
/// scheduler's wall time.
public struct BatchBench: Sendable {
    /// The `bledfu` binary: it runs the simulator and each device's flash.
    public var executable: URL
    /// The Firmware directory: the profiles the simulator loads and the sample packages (`samples/NAME-app-v2.zip`).
    public var firmware: URL
    /// The simulator's `--speedup` (air and flash times divided by it).
    public var speedup: Double
    /// The adapters' controller as `bledfu simulate --controller` takes it (`generic:links=64`).
    public var controllerSpec: String
    /// ``controllerSpec`` parsed: its link limit and connection event length.
    public var controller: ControllerProfile
    /// Links at once per adapter (nil: one per device, at most the controller's links).
    public var connections: Int?
    /// The adapter a probe uses, by its plan name (`virtual:DIR`): the transports are the caller's.
    public var makeAdapter: @Sendable (String) throws -> any BLEAdapter
    /// The longest the simulator may take to report its devices advertising.
    public var readyTimeout: Duration = .seconds(120)
    /// The simulator's environment (`BLEDFU_FIRMWARE_DIR` is set to ``firmware``).
    public var environment: [String: String] = ProcessInfo.processInfo.environment

    public init(
        executable: URL, firmware: URL, speedup: Double, controllerSpec: String, controller: ControllerProfile,
        connections: Int? = nil, makeAdapter: @escaping @Sendable (String) throws -> any BLEAdapter
    ) {
        self.executable = executable
        self.firmware = firmware
        self.speedup = speedup
        self.controllerSpec = controllerSpec
        self.controller = controller
        self.connections = connections
        self.makeAdapter = makeAdapter
    }

    /// The wall times of one device alone and of `devices` devices at once.
    public struct Comparison: Sendable, Hashable {
        public var single: Double
        public var parallel: Double
        /// parallel / single (the goal: at most 1.3).
        public var ratio: Double { parallel / single }
    }

    /// One device alone, then `devices` at once, each on a fresh simulator.
    public func compare(_ profile: BatchBenchProfile, devices: Int) async throws(BenchError) -> Comparison {
        let single = try await measure(profile, count: 1)
        let parallel = try await measure(profile, count: devices)
        return Comparison(single: single, parallel: parallel)
    }

    /// One fresh simulator with `count` devices of `profile`, one scheduler run over all of them; returns the wall
    /// time in seconds. `adapters` central adapters on the radio (each its own controller and air), `links` each
    /// (nil: ``connections``, else one per device), never more than the controller carries.
    public func measure(
        _ profile: BatchBenchProfile, count: Int, links: Int? = nil, adapters: Int = 1
    ) async throws(BenchError) -> Double {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("bledfu-bench-batch-\(UUID().uuidString.prefix(8))")
        let radio = directory.appendingPathComponent("radio")
        do {
            try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
        } catch {
            throw BenchError(.scratch, "cannot create \(radio.path): \(error.localizedDescription)", cause: error)
        }
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try BenchSimulator.start(
            executable: executable, arguments: simulatorArguments(profile, count: count, radio: radio, adapters: adapters),
            environment: environment.merging(["BLEDFU_FIRMWARE_DIR": firmware.path]) { _, new in new })
        do throws(BenchError) {
            try await simulator.waitUntilReady(timeout: readyTimeout)
            let seconds = try await flash(profile, count: count, radio: radio, directory: directory, links: links, adapters: adapters)
            await simulator.stop()
            return seconds
        } catch {
            await simulator.stop()
            throw error
        }
    }

    /// `bledfu simulate`'s arguments for a run: `count` instances of the profile on the radio, every central adapter
    /// of the run with the bench's controller.
    func simulatorArguments(_ profile: BatchBenchProfile, count: Int, radio: URL, adapters: Int) -> [String] {
        ["simulate", "--adapter", "virtual:\(radio.path)", "--device", "\(profile.name):\(count)", "--speedup", "\(speedup)"]
            + Self.adapterNames(adapters).flatMap { ["--controller", "\($0)=\(controllerSpec)"] } + ["--json"]
    }

    /// The central adapters of a run with `adapters` of them: the radio's default central alone, else `central1`,
    /// `central2`... Each gets the bench's controller (an adapter without one would have the default controller's
    /// five links, and a cell of more links would measure its refusals).
    static func adapterNames(_ adapters: Int) -> [String] {
        adapters <= 1 ? ["default"] : (1...adapters).map { "central\($0)" }
    }

    /// The plan of one run: `adapters` adapters of `links` each (one adapter: the radio's default central; more:
    /// `@central1`, `@central2`...), and `count` instances of the profile at their addresses.
    func plan(_ profile: BatchBenchProfile, count: Int, radio: URL, links: Int?, adapters: Int) -> BatchPlan {
        let perAdapter = min(links ?? connections ?? count, count, controller.maximumLinks)
        let names = Self.adapterNames(adapters)
        var plan = BatchPlan(
            adapters: names.map { name in
                BatchPlan.Adapter(name: "virtual:\(radio.path)" + (name == "default" ? "" : "@" + name), connections: perAdapter)
            },
            classes: [BatchPlan.DeviceClass(name: profile.name, package: profile.package.path)],
            devices: (0..<count).map {
                let instance = SimulatorProfileInstances.instance(profile.device, index: $0, of: count)
                return BatchPlan.ExplicitDevice(address: instance.address, addressType: instance.addressType, className: profile.name)
            })
        plan.policies = BatchPlan.Policies(retries: 0, skipAtTargetVersion: false)
        return plan
    }

    /// One scheduler run over the running simulator's `count` devices; returns the wall time.
    private func flash(
        _ profile: BatchBenchProfile, count: Int, radio: URL, directory: URL, links: Int?, adapters: Int
    ) async throws(BenchError) -> Double {
        let plan = plan(profile, count: count, radio: radio, links: links, adapters: adapters)
        let log: BatchLog
        do {
            log = try await BatchLog.open(path: directory.appendingPathComponent("bench.sqlite").path)
        } catch {
            throw BenchError(.database, error.reason, cause: error)
        }
        let scheduler = BatchScheduler(
            plan: plan, packages: [profile.name: profile.package],
            flasher: ProcessFlasher(
                executable: executable, stateDirectory: directory, logDirectory: directory.appendingPathComponent("logs"),
                makeAdapter: makeAdapter),
            log: log, batch: "bench")
        let targets = plan.devices.map { BatchTarget(peer: PeerAddress($0.address, type: $0.addressType), className: profile.name) }
        let start = ContinuousClock.now
        let summary: BatchSummary
        do {
            summary = try await scheduler.run(targets: targets)
        } catch {
            throw BenchError(.database, "\(error)", cause: error)
        }
        let elapsed = start.duration(to: .now)
        guard summary.done == count else {
            let errors = ((try? await log.devices()) ?? []).compactMap(\.error).prefix(3).joined(separator: "; ")
            throw BenchError(.devicesFailed, "\(count - summary.done) of \(count) device(s) failed: \(errors)")
        }
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}

/// A device profile the batch bench flashes: the simulator's profile and its sample package v2.
public struct BatchBenchProfile: Sendable {
    /// The profile's name (`bracelet`, `sensor`): the simulator's `--device` and the plan's class.
    public var name: String
    /// The profile instance 0 of a run is made from (``SimulatorProfileInstances``).
    public var device: DeviceProfile
    /// `samples/NAME-app-v2.zip` as the update plans it.
    public var package: PackageInfo

    public init(name: String, device: DeviceProfile, package: PackageInfo) {
        self.name = name
        self.device = device
        self.package = package
    }

    /// Loads the Secure DFU profile `name` from `catalog` and plans its sample package from `catalog`'s Firmware
    /// directory. Throws ``BenchError/Code/noFirmware`` without one.
    public static func load(_ name: String, catalog: ProfileCatalog) throws(BenchError) -> BatchBenchProfile {
        guard let firmware = catalog.directory else {
            throw BenchError(.noFirmware, "no Firmware/ directory (set BLEDFU_FIRMWARE_DIR)")
        }
        let device: DeviceProfile
        do {
            device = try catalog.load(try SimulatedDeviceRequest(parsing: name))
        } catch {
            throw BenchError(.profile, error.message, cause: error)
        }
        let path = firmware.appendingPathComponent("samples/\(name)-app-v2.zip").path
        do {
            let source = try PackageSource(contentsOf: URL(fileURLWithPath: path))
            let plan = try Updater.plan(source, options: UpdateOptions(pacing: "adaptive"))
            let info = PackageInfo(path: path, sha256: source.sha256, targetVersion: plan.targetVersion, totalBytes: plan.totalBytes)
            return BatchBenchProfile(name: name, device: device, package: info)
        } catch {
            throw BenchError(.package, error.message, cause: error)
        }
    }
}
