import ArgumentParser
import Batch
import LinuxIO
import BLECore
import DFUSimulator
import Dispatch
import Foundation
import SimulatorHost
import VirtualRadio

/// `bledfu simulate [run]`: virtual devices on a virtual radio until SIGINT/SIGTERM.
struct SimulateRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run virtual devices on a virtual radio until Ctrl-C (SIGINT) or SIGTERM (the default).",
        discussion: """
            With --adapter hciN (root, or CAP_NET_RAW) the one device named by --device becomes a real BLE \
            peripheral on that BlueZ adapter: it listens on the ATT channel and advertises over HCI, at its profile \
            address (a random address, set with LE Set Random Address) and after the buttonless jump at address + 1. \
            Stop bluetoothd on that adapter first (it answers ATT on its own). docs/vm-test.md.
            """)

    @OptionGroup var options: GlobalOptions

    @Option(
        name: .customLong("device"),
        help: ArgumentHelp(
            "A profile in Firmware/ (bracelet, sensor, pinetime, sdk11-nrf52, smp-sensor, smp-bracelet…) or a profile JSON path, optionally "
                + "with an instance count (sensor:4). Repeatable.", valueName: "name[:count]"))
    var devices: [String] = []

    @Option(name: .long, help: ArgumentHelp("Override NRF_DFU_HW_VERSION (decimal or 0x hex).", valueName: "n"))
    var hwVersion: String?

    @Option(name: .long, help: ArgumentHelp("Override the installed SoftDevice FWID (0xB7, 0x101).", valueName: "id"))
    var sdFwid: String?

    @Option(name: .long, help: ArgumentHelp("Override the installed application version.", valueName: "n"))
    var appVersion: String?

    @Flag(inversion: .prefixedNo, help: "Require signed application updates (bootloader/SoftDevice always, with keys).")
    var requireSignature: Bool?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Accept signatures by this key (PEM public key, or a private key's public half); replaces the profile's "
                + "keys. Repeatable.", valueName: "pem"))
    var publicKey: [String] = []

    @Flag(inversion: .prefixedNo, help: "Keep data progress across disconnects (NRF_DFU_SAVE_PROGRESS_IN_FLASH).")
    var saveProgress: Bool?

    @Option(name: .long, help: ArgumentHelp("Divide every modelled air and flash time by K.", valueName: "k"))
    var speedup: Double?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Faults for every device, e.g. \"disconnect-after-bytes=8192,seed=3\" (docs/simulator.md). Repeatable.",
            valueName: "items"))
    var fault: [String] = []

    @Option(name: .long, help: ArgumentHelp("Faults for every device from a FaultPlan JSON file.", valueName: "file"))
    var faultPlan: String?

    @Flag(help: "Print each device's profile and link ceilings (bytes/s), then exit (no radio needed).")
    var describe = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A central adapter's controller: ADAPTER=PRESET[:links=N,event_us=X,refusal=R,unseen=wait] (presets: "
                + ControllerProfile.presets.map(\.name).joined(separator: ", ") + "; ADAPTER as in virtual:DIR@ADAPTER, "
                + "'default' for virtual:DIR). Its links share its air; unnamed adapters get 'generic'.",
            valueName: "adapter=profile"))
    var controller: [String] = []

    @Option(name: .long, help: ArgumentHelp("Where to write status files (default DIR/status).", valueName: "dir"))
    var statusDir: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Keep each device's flash and bootloader settings here across simulator runs (installed images, "
                + "stored init command, saved data progress and bank, mode): <address>.state.json.",
            valueName: "dir"))
    var stateDir: String?

    func validate() throws {
        guard !devices.isEmpty else { throw ValidationError("name at least one --device (bracelet, sensor:4, ...)") }
        let requests = try devices.map(Self.request)
        if let speedup, !(speedup > 0) || !speedup.isFinite { throw ValidationError("--speedup must be positive") }
        if faultPlan != nil, !fault.isEmpty { throw ValidationError("use either --fault or --fault-plan, not both") }
        _ = try controllers()
        if !describe {
            switch AdapterSpec(options.adapter) {
            case .virtual: break
            case .bluez(let name?):
                let instances = requests.map(\.count).reduce(0, +)
                guard instances == 1 else {
                    throw ValidationError("a BlueZ adapter (\(name)) serves one device: name one --device without a count")
                }
            default:
                throw ValidationError("bledfu simulate needs --adapter virtual:DIR or --adapter hciN (or --describe)")
            }
        }
    }

    func run() async throws {
        let specs = try makeSpecs()
        let controllers = try controllers()
        if describe {
            for spec in specs { DescribeRenderer.emit(spec, json: options.json) }
            DescribeRenderer.emitControllers(controllers, specs: specs, json: options.json)
            return
        }
        let place: SimulatorSetup.Place
        switch AdapterSpec(options.adapter) {
        case .virtual(let radioDirectory): place = .virtual(radioDirectory: radioDirectory)
        case .bluez(let name?): place = .bluez(adapter: name)
        default: throw CLIError("bledfu simulate needs --adapter virtual:DIR or hciN", exitCode: BledfuExit.usage)
        }
        let prepared = try SimulatorSetup.prepare(
            place, controllers: controllers, events: SimulatorEvents(json: options.json), statusDirectory: statusDir,
            stateDirectory: stateDir)
        let host = prepared.host
        let signals = SignalWatch(signals: [SIGINT, SIGTERM]) { _ in host.stop() }
        defer { signals.cancel() }
        let running: [SimulatorHost.Running]
        do {
            running = try await host.start(
                specs.map { $0.hostedEntry(stateDirectory: stateDir, sharedAir: prepared.sharedAir) },
                statusDirectory: prepared.statusDirectory, stateDirectory: stateDir)
        } catch {
            if host.isStopping { return }
            throw CLIError(error.message, exitCode: (error.cause as? AdapterError).map(BledfuExit.code(for:)) ?? BledfuExit.failure)
        }
        let statusDirectory = prepared.statusDirectory
        if options.json {
            Console.json(["event": "ready", "devices": running.count, "radio": host.place.hasPrefix("virtual:") ? String(host.place.dropFirst(8)) : host.place, "status": statusDirectory])
        } else {
            Console.errorRaw(
                "bledfu simulate: \(running.count) device(s) on \(host.place) (status in \(statusDirectory)); Ctrl-C stops")
        }
        if let error = await host.run(running) { throw CLIError(error.message, exitCode: BledfuExit.failure) }
        if options.json {
            Console.json(["event": "stopped"])
        } else {
            Console.errorRaw("bledfu simulate: stopped")
        }
    }

    /// The options → SimulatorHost's ``SimulatorSetup/specs(_:catalog:overrides:faults:stateDirectory:)``.
    func makeSpecs() throws -> [SimulatedDeviceSpec] {
        let overrides = ProfileOverrides(
            hwVersion: try hwVersion.map {
                UInt32(try parseNumber($0, option: "--hw-version", max: UInt64(UInt32.max)))
            },
            softDeviceFWID: try sdFwid.map { UInt16(try parseNumber($0, option: "--sd-fwid", max: 0xFFFF)) },
            applicationVersion: try appVersion.map {
                UInt32(try parseNumber($0, option: "--app-version", max: UInt64(UInt32.max)))
            },
            requireSignature: requireSignature, publicKeys: try ProfileOverrides.readKeys(publicKey),
            saveProgress: saveProgress, speedup: speedup)
        let faults = try SimulatorSetup.faultPlan(file: faultPlan, items: fault)
        let requests = try devices.map(Self.request)
        return try SimulatorSetup.specs(
            requests, catalog: SimulatorProfiles.catalog, overrides: overrides, faults: faults, stateDirectory: stateDir)
    }

    /// A `--device`, its error as a usage error.
    static func request(_ text: String) throws -> SimulatedDeviceRequest {
        do throws(SimulatorError) {
            return try SimulatedDeviceRequest(parsing: text)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// `--controller ADAPTER=PROFILE`, each adapter once.
    func controllers() throws -> [(adapter: String, profile: ControllerProfile)] {
        var result: [(adapter: String, profile: ControllerProfile)] = []
        for text in controller {
            let pair = text.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, let parsed = VirtualRadio.parse("x@" + pair[0]), parsed.adapter == pair[0] else {
                throw ValidationError("--controller '\(text)': expected ADAPTER=PROFILE (e.g. default=s140)")
            }
            guard !result.contains(where: { $0.adapter == pair[0] }) else {
                throw ValidationError("--controller: adapter \(pair[0]) named twice")
            }
            do throws(ControllerProfileError) {
                result.append((pair[0], try ControllerProfile(parsing: pair[1])))
            } catch {
                throw ValidationError("--controller \(pair[0]): \(error.reason)")
            }
        }
        return result
    }

    func parseNumber(_ text: String, option: String, max: UInt64) throws -> UInt64 {
        let lower = text.lowercased()
        let value = lower.hasPrefix("0x") ? UInt64(lower.dropFirst(2), radix: 16) : UInt64(lower)
        guard let value, value <= max else {
            throw CLIError(
                "\(option): '\(text)' is not a number up to \(max) (decimal or 0x hex)", exitCode: BledfuExit.usage)
        }
        return value
    }
}
