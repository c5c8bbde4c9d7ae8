import BLECore
import BlueZTransport
import DFUSimulator
import Foundation
import VirtualRadio

/// What `bledfu simulate` runs, made from what its command line names: the device specs (profiles → instances →
/// state restore → overrides → address check), the fault plan, and the host on a virtual radio or a BlueZ adapter.
public enum SimulatorSetup {
    /// The devices to run: each request's profile from `catalog`, `count` instances of it, the installed images
    /// restored from `stateDirectory`'s status copies (Secure DFU), `overrides` applied, every device with `faults`.
    /// Throws when a profile cannot be loaded, an override does not apply, or two devices would share an address
    /// (application or bootloader mode; the first shared one in the order of
    /// ``SimulatorProfileInstances/advertisedAddresses(_:)``).
    public static func specs(
        _ requests: [SimulatedDeviceRequest], catalog: ProfileCatalog, overrides: ProfileOverrides, faults: FaultPlan,
        stateDirectory: String?
    ) throws(SimulatorError) -> [SimulatedDeviceSpec] {
        var specs: [SimulatedDeviceSpec] = []
        var used: [BluetoothAddress: String] = [:]
        for request in requests {
            let base = try catalog.loadAny(request)
            for index in 0..<request.count {
                var profile = SimulatorProfileInstances.instance(base, index: index, of: request.count)
                if case .secure(var secure) = profile {
                    SimulatorProfileInstances.restore(&secure, from: stateDirectory)
                    profile = .secure(secure)
                }
                try overrides.apply(to: &profile)
                for address in SimulatorProfileInstances.advertisedAddresses(profile) {
                    if let other = used[address] {
                        throw SimulatorError(
                            .addressCollision, "\(profile.name) and \(other) would both use address \(address)")
                    }
                    used[address] = profile.name
                }
                specs.append(SimulatedDeviceSpec(device: profile, faults: faults))
            }
        }
        return specs
    }

    /// The faults of every device: the FaultPlan JSON file `file`, else the `--fault` items (each a comma-separated
    /// list, docs/simulator.md).
    public static func faultPlan(file: String?, items: [String]) throws(SimulatorError) -> FaultPlan {
        if let file {
            do {
                return try JSONDecoder().decode(FaultPlan.self, from: Data(contentsOf: URL(fileURLWithPath: file)))
            } catch {
                throw SimulatorError(.invalidFaultPlan, "--fault-plan \(file): \(error)", cause: error)
            }
        }
        do throws(FaultPlanError) {
            return try FaultPlan(parsing: items.flatMap { $0.split(separator: ",").map(String.init) })
        } catch {
            throw SimulatorError(.invalidFaultPlan, "--fault: \(error.reason)", cause: error)
        }
    }

    /// Where the devices are served.
    public enum Place: Sendable, Hashable {
        /// A virtual radio directory (docs/virtual-radio.md).
        case virtual(radioDirectory: String)
        /// A BlueZ adapter ("hci1"): one device, a real BLE peripheral (docs/vm-test.md).
        case bluez(adapter: String)
    }

    /// A host ready to start: where its status files go and the air its devices' links share.
    public struct Prepared: Sendable {
        public var host: SimulatorHost
        /// On a virtual radio: the central adapters' controllers, shared by every link of this process's devices.
        public var sharedAir: SharedAir?
        public var statusDirectory: String
    }

    /// Writes the named central adapters' controller profiles into the radio directory (a virtual radio) and makes
    /// the host. The status directory is `statusDirectory`, else `DIR/status` on a virtual radio, else
    /// `<stateDirectory or $TMPDIR/bledfu-simulate-ADAPTER>/status`.
    public static func prepare(
        _ place: Place, controllers: [(adapter: String, profile: ControllerProfile)], events: any HostEvents,
        statusDirectory: String?, stateDirectory: String?
    ) throws(SimulatorError) -> Prepared {
        switch place {
        case .virtual(let radioDirectory):
            for (adapter, profile) in controllers {
                do {
                    // The radio directory may not exist yet (the host makes it later, `mkdir -p` as the devices do).
                    try FileManager.default.createDirectory(atPath: radioDirectory, withIntermediateDirectories: true)
                    try VirtualController(radio: radioDirectory, name: adapter).write(profile)
                } catch {
                    throw SimulatorError(
                        .controllerUnwritable, "--controller \(adapter): cannot write its profile: \(error)", cause: error)
                }
            }
            // This process serves every device of the radio, so it sees all links of each central adapter and
            // shares that adapter's controller here, for every family's links (docs/simulator.md; an adapter without
            // a --controller has the default controller).
            return Prepared(
                host: SimulatorHost(radioDirectory: radioDirectory, events: events),
                sharedAir: SharedAir { adapter in VirtualController(radio: radioDirectory, name: adapter).profile() },
                statusDirectory: statusDirectory ?? radioDirectory + "/status")
        case .bluez(let name):
            let host = SimulatorHost(place: name, events: events) { () throws(AdapterError) in
                try BlueZPeripheralEndpoint(adapterName: name)
            }
            return Prepared(
                host: host, sharedAir: nil,
                statusDirectory: statusDirectory
                    ?? (stateDirectory ?? NSTemporaryDirectory() + "bledfu-simulate-" + name) + "/status")
        }
    }
}
