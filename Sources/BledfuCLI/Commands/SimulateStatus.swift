import ArgumentParser
import Batch
import BLECore
import DFUSimulator
import Foundation
import MCUmgr
import SimulatorHost

/// `bledfu simulate status`: print the status files of a running (or stopped) simulator.
struct SimulateStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Print the virtual devices' status files (DeviceState, docs/simulator.md).")

    @OptionGroup var options: GlobalOptions

    @Option(
        name: .long,
        help: ArgumentHelp("Only this device (its identity or current address).", valueName: "address"))
    var device: String?

    @Option(name: .long, help: ArgumentHelp("The status directory (default DIR/status).", valueName: "dir"))
    var statusDir: String?

    func validate() throws {
        if statusDir == nil {
            guard case .virtual = AdapterSpec(options.adapter) else {
                throw ValidationError("bledfu simulate status needs --adapter virtual:DIR or --status-dir")
            }
        }
    }

    func run() async throws {
        let wanted = try device.map(parseAddress)  // a bad address: exit 14
        let directory: String
        if let statusDir {
            directory = statusDir
        } else if case .virtual(let radio) = AdapterSpec(options.adapter) {
            directory = radio + "/status"
        } else {
            throw CLIError("bledfu simulate status needs --adapter virtual:DIR", exitCode: BledfuExit.usage)
        }
        let entries = try SimulatorStatus.read(directory: directory, device: wanted)
        for entry in entries {
            switch entry {
            case .legacy(let identity, let legacy):
                if options.json {
                    Console.jsonLine(LegacyStatusEvent(identity: identity?.description ?? "", state: legacy))
                } else {
                    print(Self.summary(legacy, identity: identity))
                }
            case .smp(let identity, let smp):
                if options.json {
                    Console.jsonLine(SMPStatusEvent(identity: identity?.description ?? "", state: smp))
                } else {
                    print(Self.summary(smp, identity: identity))
                }
            case .secure(let identity, let state):
                if options.json {
                    Console.jsonLine(StatusEvent(identity: identity?.description ?? "", state: state))
                } else {
                    print(Self.summary(state, identity: identity))
                }
            case .unreadable(let path, let reason):
                Console.warning("\(path): not a device status file (\(reason))")
            }
        }
        if !entries.contains(where: \.isDevice) { throw SimulatorStatus.noDevice(device, in: directory) }
    }

    static func summary(_ state: DeviceState, identity: BluetoothAddress?) -> String {
        let app = state.installed.application.map { "app v\($0.version)" } ?? "no app"
        let counters = state.counters
        var line = "\(identity?.description ?? state.address) \(state.name) \(state.mode.rawValue) at \(state.address)"
        line += state.connected ? " connected" : " idle"
        line += ", \(app), bootloader v\(state.installed.bootloader.version)"
        if let softdevice = state.installed.softdevice { line += ", softdevice v\(softdevice.version)" }
        line += "; updates \(counters.updatesCompleted), connections \(counters.connections)"
        line += ", bytes \(counters.bytesReceived), faults \(counters.faultsFired)"
        if state.settings.firmwareSize > 0 {
            line += "; progress \(state.settings.dataOffset)/\(state.settings.firmwareSize)"
        }
        return line
    }
}

extension SimulateStatus {
    /// One line for an SMP device: its slots and counters.
    static func summary(_ state: SMPDeviceState, identity: BluetoothAddress?) -> String {
        var line = "\(identity?.description ?? state.address) \(state.name) smp at \(state.address)"
        line += state.connected ? " connected" : (state.available ? " idle" : " booting")
        for slot in state.images {
            let flags = [slot.active ? "active" : nil, slot.confirmed ? "confirmed" : nil, slot.pending ? "pending" : nil]
                .compactMap { $0 }.joined(separator: " ")
            line += ", image \(slot.image) slot \(slot.slot) v\(slot.version)\(flags.isEmpty ? "" : " " + flags)"
        }
        let counters = state.counters
        line += "; resets \(counters.resets), swaps \(counters.swaps), upload bytes \(counters.uploadBytesWritten)"
        line += ", faults \(counters.faults.count)"
        if let upload = state.upload { line += "; upload \(upload.offset)/\(upload.length)" }
        return line
    }

    static func summary(_ state: LegacyDeviceState, identity: BluetoothAddress?) -> String {
        let app = state.installed.application.map { "app v\($0.version)" } ?? "no app"
        let counters = state.counters
        var line = "\(identity?.description ?? state.address) \(state.name) legacy \(state.kind.rawValue) \(state.mode.rawValue)"
        line += " at \(state.address)" + (state.connected ? " connected" : " idle") + ", \(app)"
        line += "; updates \(counters.updatesCompleted), connections \(counters.connections), bytes \(counters.bytesReceived)"
        line += ", refused \(counters.packetsRefused), resets \(counters.resets), faults \(counters.faultsFired)"
        let transfer = state.transfer
        if transfer.state != "idle" { line += "; \(transfer.state) \(transfer.dataReceived)/\(transfer.applicationSize + transfer.softdeviceSize + transfer.bootloaderSize)" }
        return line
    }
}

/// The NDJSON line `simulate status --json` prints per SMP device.
struct SMPStatusEvent: Encodable {
    var event = "status"
    var identity: String
    var state: SMPDeviceState
}

/// The NDJSON line `simulate status --json` prints per Legacy device.
struct LegacyStatusEvent: Encodable {
    var event = "status"
    var identity: String
    var state: LegacyDeviceState
}

/// The NDJSON line `simulate status --json` prints per device.
struct StatusEvent: Encodable {
    var event = "status"
    var identity: String
    var state: DeviceState
}
