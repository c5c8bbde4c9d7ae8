import Batch
import BLECore
import Foundation

/// Which device `flash --name` (and `--min-rssi`) means, as BLE tools do it: listen a little after the first
/// match so that every device of that name is seen; several are an error listing them, unless `--strongest` picks
/// the one heard loudest (docs: README "Choosing the device").
enum DeviceSelection {
    /// One device heard: its address, name and strongest RSSI.
    struct Candidate: Sendable, Equatable {
        var peer: PeerAddress
        var name: String
        var rssi: Int8?

        var line: String {
            "\(peer.address) '\(name)' " + (rssi.map { "\($0) dBm" } ?? "? dBm")
        }
    }

    /// How long the scan goes on after the first match to hear the others (advertising intervals are up to about
    /// a second on the devices bledfu updates; two seconds hear each at least once).
    static let settle: Duration = .seconds(2)

    /// Devices that match `filter`, strongest first: a scan until the first match (or `timeout`), then one of
    /// ``settle`` that hears the others.
    static func candidates(adapter: any BLEAdapter, filter: ScanFilter, timeout: Duration) async throws(CLIError) -> [Candidate] {
        var seen: [BluetoothAddress: Candidate] = [:]
        func heard(_ advertisement: Advertisement) {
            let candidate = Candidate(peer: advertisement.peer, name: advertisement.parsed.name ?? "", rssi: advertisement.rssi)
            if let known = seen[advertisement.peer.address], (known.rssi ?? -128) >= (candidate.rssi ?? -128) { return }
            seen[advertisement.peer.address] = candidate
        }
        do {
            for try await advertisement in adapter.scan(filter: filter, duration: timeout) {
                heard(advertisement)
                break
            }
            if !seen.isEmpty {
                for try await advertisement in adapter.scan(filter: filter, duration: settle) { heard(advertisement) }
            }
        } catch let error as AdapterError {
            throw CLIError(error)
        } catch {
            throw CLIError("scan failed: \(error)", exitCode: BledfuExit.failure)
        }
        return seen.values.sorted { ($0.rssi ?? -128, $1.peer.address.description) > ($1.rssi ?? -128, $0.peer.address.description) }
    }

    /// The one device meant: none is "device not found" (17), several are "ambiguous" (23) unless `strongest`.
    static func choose(_ candidates: [Candidate], wanted: String, minimumRSSI: Int?, strongest: Bool) throws(CLIError) -> Candidate {
        guard let first = candidates.first else {
            let floor = minimumRSSI.map { " at \($0) dBm or stronger" } ?? ""
            throw CLIError("no device \(wanted) was heard\(floor)", exitCode: BledfuExit.deviceNotFound)
        }
        guard candidates.count == 1 || strongest else {
            throw CLIError(
                "\(wanted) matches \(candidates.count) devices: " + candidates.map(\.line).joined(separator: ", ")
                    + "; give --device ADDRESS, or --strongest to take the strongest", exitCode: BledfuExit.ambiguousDevice)
        }
        return first
    }
}
