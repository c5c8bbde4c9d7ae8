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
    @Option(name: .long, help: "Keep devices at least this strong (dBm, e.g. -70).") var minRssi: Int?
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
        var count = 0
        do {
            for try await advertisement in adapter.scan(filter: filter, duration: .milliseconds(Int64(seconds * 1000))) {
                count += 1
                let ad = advertisement.parsed
                if options.json {
                    var event: [String: any Sendable] = [
                        "event": "advertisement", "address": advertisement.peer.address.description,
                        "addressType": advertisement.peer.type.rawValue, "data": advertisement.data.hexString,
                        "services": ad.serviceUUIDs.map(\.description),
                    ]
                    if let rssi = advertisement.rssi { event["rssi"] = Int(rssi) }
                    if let name = ad.name { event["name"] = name }
                    if let family = DefaultFamilies.family(advertising: ad.serviceUUIDs) { event["family"] = family.rawValue }
                    Console.json(event)
                } else {
                    let rssi = advertisement.rssi.map { "\($0) dBm" } ?? "? dBm"
                    let services = ad.serviceUUIDs.map(\.description).joined(separator: ",")
                    let family = DefaultFamilies.family(advertising: ad.serviceUUIDs)?.rawValue ?? "-"
                    print(
                        "\(advertisement.peer.address) \(advertisement.peer.type) \(rssi) \(family) \(ad.name ?? "(no name)") \(services)")
                }
            }
        } catch let error as AdapterError {
            throw CLIError(error)
        }
        if !options.json { Console.errorRaw("\(count) device(s) found on \(adapter.name)") }
    }
}
