import BLECore
import DFUSimulator
import SimulatorHost

/// Lines the simulator prints: text on standard error, or NDJSON on standard output with `--json`.
struct SimulatorEvents: HostEvents {
    var json: Bool

    func emit(_ event: String, device: String?, address: BluetoothAddress, name: String?) {
        let label = name ?? device ?? ""
        if json {
            Console.json(["event": event, "address": address.description, "name": label])
        } else {
            Console.errorRaw("bledfu simulate: \(label) \(address) \(event)")
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
