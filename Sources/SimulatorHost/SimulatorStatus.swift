import BLECore
import DFUSimulator
import Foundation

/// `bledfu simulate status`: the status files a running (or stopped) simulator wrote, one per device
/// (docs/simulator.md). The CLI renders them as text lines or NDJSON.
public enum SimulatorStatus {
    /// One file of the status directory.
    public enum Entry: Sendable {
        /// A Secure DFU device's status, by identity (the file name's address).
        case secure(identity: BluetoothAddress?, DeviceState)
        case legacy(identity: BluetoothAddress?, LegacyDeviceState)
        case smp(identity: BluetoothAddress?, SMPDeviceState)
        /// A JSON file that is no device status file (`path`, and why it does not decode).
        case unreadable(path: String, reason: String)

        /// Whether it is a device's status (not an unreadable file).
        public var isDevice: Bool {
            if case .unreadable = self { return false }
            return true
        }
    }

    /// The status files of `directory` in name order (`*.json`, hidden files skipped); with `device`, only that
    /// device's (its identity or its current address). Throws ``SimulatorError/Code/noStatus`` when the directory
    /// cannot be read.
    public static func read(directory: String, device wanted: BluetoothAddress?) throws(SimulatorError) -> [Entry] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw SimulatorError(.noStatus, "no status directory \(directory)", cause: error)
        }
        var entries: [Entry] = []
        for name in names.sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
            let identity = BluetoothAddress(String(name.dropLast(".json".count)))
            guard let data = FileManager.default.contents(atPath: directory + "/" + name) else { continue }
            func matches(_ address: String) -> Bool {
                guard let wanted else { return true }
                return wanted == identity || wanted == BluetoothAddress(address)
            }
            if let legacy = try? JSONDecoder().decode(LegacyDeviceState.self, from: data), legacy.family == "legacy" {
                if matches(legacy.address) { entries.append(.legacy(identity: identity, legacy)) }
                continue
            }
            if let smp = try? JSONDecoder().decode(SMPDeviceState.self, from: data), smp.family == "smp" {
                if matches(smp.address) { entries.append(.smp(identity: identity, smp)) }
                continue
            }
            let state: DeviceState
            do {
                state = try JSONDecoder().decode(DeviceState.self, from: data)
            } catch {
                entries.append(.unreadable(path: directory + "/" + name, reason: "\(error)"))
                continue
            }
            if matches(state.address) { entries.append(.secure(identity: identity, state)) }
        }
        return entries
    }

    /// The error when no entry of ``read(directory:device:)`` is a device: `device` is the text the user named it by.
    public static func noDevice(_ device: String?, in directory: String) -> SimulatorError {
        let which = device.map { " for \($0)" } ?? ""
        return SimulatorError(.noStatus, "no device status\(which) in \(directory)")
    }
}
