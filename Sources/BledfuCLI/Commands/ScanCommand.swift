import ArgumentParser
import BLECore
import DFUProtocol
import LegacyDFU
import MCUmgr

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
            let family = Self.family(ad.serviceUUIDs, name: ad.name) ?? "-"
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
        if let family = Self.family(ad.serviceUUIDs, name: ad.name) { event["family"] = family }
        return event
    }

    /// The DFU family an advertisement names by its service UUIDs: 8D53DC1D-… MCUmgr SMP (Zephyr's
    /// CONFIG_MCUMGR_TRANSPORT_BT advertises it when the application puts it in its advertising data), FE59 Secure
    /// DFU, Legacy DFU as its family tells (``LegacyAdvertisement``: the 00001530-… service, the bootloaders' names);
    /// nil when it lists none (an application usually advertises its own services: `bledfu flash` finds the family
    /// once connected).
    static func family(_ services: [BluetoothUUID], name: String?) -> String? {
        if services.contains(SMPUUID.service) { return "smp" }
        if services.contains(SecureDFUUUID.service) { return "secure" }
        if LegacyAdvertisement.isLegacy(services: services, name: name) { return "legacy" }
        return nil
    }
}
