import ArgumentParser
import Batch
import BLECore
import BlueZTransport
import Foundation
import VirtualRadio

/// `bledfu adapters`: the adapters bledfu can use, with what keeps one from working.
struct AdaptersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adapters",
        abstract: "List the Bluetooth adapters: address, powered, rfkill, LE support, open links and the links allowed.",
        discussion: """
            Without --adapter: every adapter the kernel knows (HCI ioctls; no capability needed), powered or not. \
            A real controller does not report how many links it allows ("not reported"); a virtual adapter's \
            controller profile does (docs/virtual-radio.md §4.2). Exit 11 when the kernel lists no adapter, \
            10 when it has no Bluetooth support.

            Examples:
              bledfu adapters
              bledfu adapters --adapter hci1 --json
              bledfu adapters --adapter virtual:/tmp/radio
            """)

    @Option(
        name: .long,
        help: ArgumentHelp("Only this adapter (hciN), or the adapters of a virtual radio (virtual:DIR).", valueName: "adapter"),
        completion: Completions.adapter)
    var adapter: String?
    @Flag(name: .long, help: "Print one JSON object per adapter (NDJSON).") var json = false

    /// One adapter as `bledfu adapters` shows it.
    struct Row: Equatable, Encodable {
        var name: String
        var address: String?
        var powered: Bool
        /// "unblocked", "soft-blocked", "hard-blocked", "hard- and soft-blocked", or nil without an rfkill switch.
        var rfkill: String?
        var le: Bool
        var openLinks: Int?
        /// Nil: the controller does not report it (every real one).
        var linksAllowed: Int?
        var bus: String
        /// What to do about it, when something keeps the adapter from working.
        var notes: [String]

        enum CodingKeys: String, CodingKey { case name, address, powered, rfkill, le, openLinks, linksAllowed, bus, notes }

        /// Every key present: a value the adapter does not have is `null`.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(address, forKey: .address)
            try container.encode(powered, forKey: .powered)
            try container.encode(rfkill, forKey: .rfkill)
            try container.encode(le, forKey: .le)
            try container.encode(openLinks, forKey: .openLinks)
            try container.encode(linksAllowed, forKey: .linksAllowed)
            try container.encode(bus, forKey: .bus)
            try container.encode(notes, forKey: .notes)
        }
    }

    func validate() throws {
        if let adapter, AdapterSpec(adapter) == nil || adapter == "any" {
            throw ValidationError("--adapter must be hciN or virtual:DIR (got '\(adapter)')")
        }
    }

    func run() throws {
        let rows: [Row]
        switch adapter.flatMap(AdapterSpec.init) {
        case .virtual(let directory): rows = Self.virtualRows(directory)
        case .bluez(let name): rows = try Self.kernelRows(only: name)
        case nil: rows = try Self.kernelRows(only: nil)
        }
        if json {
            for row in rows { Console.jsonLine(row) }
        } else {
            print(Self.table(rows), terminator: "")
        }
    }

    static func kernelRows(only name: String?) throws(CLIError) -> [Row] {
        let statuses: [BlueZAdapterStatus]
        do {
            statuses = try BlueZAdapter.statuses()
        } catch {
            throw CLIError(error)
        }
        let rows = statuses.filter { name == nil || $0.info.name == name }.map(row)
        if rows.isEmpty {
            let what = name.map { "no adapter \($0)" } ?? "no Bluetooth adapter"
            throw CLIError(
                "\(what): the kernel lists \(statuses.isEmpty ? "none" : statuses.map(\.info.name).joined(separator: ", ")) "
                    + "(is the controller plugged in and its driver loaded? `dmesg | grep -i bluetooth`)",
                exitCode: BledfuExit.noAdapter)
        }
        return rows
    }

    static func row(_ status: BlueZAdapterStatus) -> Row {
        let info = status.info
        var notes: [String] = []
        if let rfkill = status.rfkill, rfkill.softBlocked || rfkill.hardBlocked { notes.append("\(info.name) is \(rfkill)") }
        if !info.isUp { notes.append("\(info.name) is powered off: `bluetoothctl power on` or `sudo hciconfig \(info.name) up`") }
        if info.isUp, !info.supportsLE { notes.append("\(info.name) does not support Bluetooth LE (bledfu needs a 4.0+ controller)") }
        if info.address == nil { notes.append("\(info.name) has no address yet (a controller never powered on)") }
        return Row(
            name: info.name, address: info.address?.description, powered: info.isUp, rfkill: status.rfkill.map(rfkillWord),
            le: info.supportsLE, openLinks: status.openLinks, linksAllowed: nil, bus: info.busName, notes: notes)
    }

    static func rfkillWord(_ state: RfkillState) -> String {
        switch (state.softBlocked, state.hardBlocked) {
        case (false, false): "unblocked"
        case (true, false): "soft-blocked"
        case (false, true): "hard-blocked"
        case (true, true): "hard- and soft-blocked"
        }
    }

    /// The adapters of a virtual radio: `default` and each adapter with a controller profile or links there.
    static func virtualRows(_ directory: String) -> [Row] {
        VirtualController.names(radio: directory).map { name in
            let controller = VirtualController(radio: directory, name: name)
            return Row(
                name: name == VirtualController.defaultName ? "virtual:\(directory)" : "virtual:\(directory)@\(name)", address: nil,
                powered: true, rfkill: nil, le: true, openLinks: controller.linkCount(), linksAllowed: controller.profile().maximumLinks,
                bus: "virtual radio", notes: [])
        }
    }

    static func table(_ rows: [Row]) -> String {
        let header = ["ADAPTER", "ADDRESS", "POWERED", "RFKILL", "LE", "LINKS", "ALLOWED", "BUS"]
        let cells = rows.map { row in
            [
                row.name, row.address ?? "-", row.powered ? "yes" : "no", row.rfkill ?? "none", row.le ? "yes" : "no",
                row.openLinks.map(String.init) ?? "-", row.linksAllowed.map(String.init) ?? "not reported", row.bus,
            ]
        }
        let widths = header.indices.map { column in ([header] + cells).map { $0[column].count }.max() ?? 0 }
        func line(_ fields: [String]) -> String {
            zip(fields, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces) + "\n"
        }
        return line(header) + cells.map(line).joined() + rows.flatMap(\.notes).map { "note: \($0)\n" }.joined()
    }

}
