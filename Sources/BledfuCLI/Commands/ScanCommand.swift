import ArgumentParser
import BLECore
import BledfuKit

/// `bledfu scan`: list advertising devices.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for advertising devices (BlueZ needs CAP_NET_RAW; the virtual radio needs nothing).")

    @OptionGroup var options: GlobalOptions
    @Option(name: .long, help: "Keep devices whose name starts with this.") var name: String?
    @Option(name: .long, help: "Keep devices advertising this service UUID (FE59 for Secure DFU).") var service: String?
    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Keep devices at least this strong (dBm, e.g. -70).", valueName: "dBm"))
    var minRssi: Int?
    @Option(name: .long, help: "Seconds to scan (default: --timeout).") var duration: Double?

    func validate() throws {
        if let service, BluetoothUUID(service) == nil { throw ValidationError("--service: '\(service)' is not a UUID") }
        if let minRssi, !(-127...20).contains(minRssi) { throw ValidationError("--min-rssi must be between -127 and 20") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
    }

    func run() async throws {
        let adapter = try makeAdapter(options)
        let filter = ScanFilter(
            namePrefix: name, serviceUUID: service.flatMap(BluetoothUUID.init), minimumRSSI: minRssi.map { Int8($0) })
        let seconds = duration ?? options.timeout
        // Each device's latest advertisement; on a terminal the table is redrawn sorted by RSSI as devices are
        // heard, on a pipe it is printed once, sorted, at the end; --json streams one event per advertisement.
        var devices: [BluetoothAddress: Advertisement] = [:]
        var region = LiveRegion()
        let live = !options.json && TerminalOutput.standardOutput().redraws
        do {
            for try await advertisement in adapter.scan(filter: filter, duration: .milliseconds(Int64(seconds * 1000))) {
                devices[advertisement.peer.address] = advertisement
                if options.json {
                    Console.json(Self.event(advertisement))
                } else if live {
                    FlashRenderer.out(region.redraw(Self.table(devices), size: TerminalOutput.size(), newline: true))
                }
            }
        } catch let error as AdapterError {
            throw CLIError(error)
        }
        if !options.json && !live { for line in Self.table(devices) { Console.out(line) } }
        if !options.json, !options.quiet { Console.errorRaw("\(devices.count) device(s) found on \(adapter.name)") }
    }

    /// One line per device, strongest first (ties by address): address, type, RSSI, family, name, services with
    /// their assigned names.
    static func table(_ devices: [BluetoothAddress: Advertisement]) -> [String] {
        devices.values.sorted { a, b in
            (a.rssi ?? -128, b.peer.address.description) > (b.rssi ?? -128, a.peer.address.description)
        }.map { advertisement in
            let ad = advertisement.parsed
            let rssi = advertisement.rssi.map { "\($0) dBm" } ?? "? dBm"
            let services = ad.serviceUUIDs.map(AssignedNumbers.label).joined(separator: ", ")
            let family = DefaultFamilies.family(advertising: ad.serviceUUIDs, name: ad.name)?.rawValue ?? "-"
            return "\(advertisement.peer.address) \(advertisement.peer.type) \(rssi) \(family) \(ad.name ?? "(no name)") \(services)"
        }
    }

    static func event(_ advertisement: Advertisement) -> [String: any Sendable] {
        let ad = advertisement.parsed
        var event: [String: any Sendable] = [
            "event": "advertisement", "address": advertisement.peer.address.description,
            "addressType": advertisement.peer.type.rawValue, "data": advertisement.data.hexString,
            "services": ad.serviceUUIDs.map(\.description),
            "serviceNames": ad.serviceUUIDs.map { AssignedNumbers.name(of: $0) ?? "" },
        ]
        if let rssi = advertisement.rssi { event["rssi"] = Int(rssi) }
        if let name = ad.name { event["name"] = name }
        if let family = DefaultFamilies.family(advertising: ad.serviceUUIDs, name: ad.name) { event["family"] = family.rawValue }
        return event
    }
}
