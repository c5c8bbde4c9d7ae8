import BLECore
import DFUSimulator
import LinuxIO
import SimulatorHost

/// Lines the simulator prints: text on standard error, or NDJSON on standard output with `--json`.
struct SimulatorEvents: HostEvents {
    var json: Bool

    func emit(_ event: String, device: HostedDeviceEntry?, address: BluetoothAddress, name: String?, peer: PeerProcess?) {
        let label = name ?? device?.name ?? ""
        if json {
            var object: [String: any Sendable] = ["event": event, "address": address.description, "name": label]
            if let device { object["identity"] = device.identity.description }
            if let peer {
                object["pid"] = Int(peer.pid)
                if let parent = peer.parent { object["parent_pid"] = Int(parent) }
                object["at_us"] = Int(system_realtimeMicroseconds())
            }
            Console.json(object)
        } else {
            let who = peer.map { " (pid \($0.pid)\($0.parent.map { ", parent \($0)" } ?? ""))" } ?? ""
            Console.errorRaw("bledfu simulate: \(label) \(address) \(event)\(who)")
        }
    }

    func fault(_ record: FaultRecord, device: String, address: String) {
        if json {
            Console.json([
                "event": "fault", "name": device, "address": address, "kind": record.kind,
                "trigger": record.trigger, "bytes_received": Int(clamping: record.bytesReceived),
                "at_ms": record.atMilliseconds,
            ])
        } else {
            Console.errorRaw("bledfu simulate: \(device) \(address) fault \(record)")
        }
    }

    func failure(_ message: String) {
        Console.warning(message)
    }
}
