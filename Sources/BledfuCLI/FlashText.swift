import DFUCore
import DFUPackage
import Foundation
import MCUbootImage

/// The words `flash` and `resume` print for people: one short sentence per step, the progress line, the final
/// line (docs/events.md has the NDJSON; this is the terminal's and the log's text).
enum FlashText {
    /// The sentence for a step, or nil for events that have their own rendering (progress, warnings, the result).
    static func sentence(_ event: UpdateEvent) -> String? {
        switch event {
        case .scanning(let name): "Looking for a device whose name starts with '\(name)'"
        case .connecting(let address): "Connecting to \(address)"
        case .found(let address, let name, let byName):
            byName || name.isEmpty ? "Found \(name.isEmpty ? "a device" : "'\(name)'") at \(address)" : "Found \(address) ('\(name)')"
        case .detected(let family, let mode, let address): "\(address) is a \(familyName(family)) device \(modeWords(mode))"
        case .applicationMode(_, let bonded):
            "Its application runs: asking it to restart into its bootloader" + (bonded ? " (bonded)" : "")
        case .jumping(let address, _): "Restarting \(address) into its bootloader"
        case .updaterReady(let family, let address):
            family == .smp ? "\(address) is ready to take the image" : "The bootloader is ready at \(address)"
        case .reconnecting(let attempt, let of, let delay):
            "Reconnecting (attempt \(attempt) of \(of), after \(String(format: "%.1f", Double(delay) / 1000)) s)"
        case .uploading(let part, let parts, let name, let bytes): "Sending part \(part) of \(parts): \(name), \(bytes) bytes"
        case .partSkipped(let part, let name, let reason): "Skipping part \(part) (\(name)): \(reason)"
        case .partCompleted(let part, let name): "Part \(part) (\(name)) is on the device"
        case .completed(let address): "Every part is on \(address)"
        case .message(let text): text
        case .progress, .warning, .result, .unknown: nil
        }
    }

    static func familyName(_ family: DFUFamilyID) -> String {
        switch family {
        case .secure: "Secure DFU"
        case .legacy: "Legacy DFU"
        case .smp: "MCUmgr SMP"
        default: family.rawValue
        }
    }

    static func modeWords(_ mode: DetectedMode) -> String {
        switch mode {
        case .updater: "ready for the update"
        case .application: "running its application"
        case .applicationWithoutEntry: "running its application, with no way into its bootloader"
        }
    }

    /// The progress line, fitted to `width` columns: the least useful fields go first (retries, the average, the
    /// byte counts, the object), then the bar narrows; what is left is cut.
    static func progress(_ p: UpdateProgress, width: Int) -> String {
        let eta = p.etaSeconds.map { "ETA \($0 / 60):" + String(format: "%02d", $0 % 60) } ?? "ETA --:--"
        func bar(_ cells: Int) -> String {
            let filled = p.total > 0 ? cells * p.bytes / p.total : cells
            return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: max(0, cells - filled)) + "]"
        }
        let object = p.object.map { "obj \($0)/\(p.objects ?? 0)" } ?? ""
        func pieces(_ cells: Int) -> [(text: String, rank: Int)] {
            [
                ("part \(p.part)/\(p.parts)", 0), (cells > 0 ? bar(cells) : "", 3), ("\(p.percent)%", 0),
                (object, 6), ("\(p.bytes)/\(p.total) B", 5), ("\(kB(p.bytesPerSecond)) kB/s", 2),
                ("(avg \(kB(p.averageBytesPerSecond)))", 7), (eta, 1), ("retries \(p.retries)", 8),
            ]
        }
        for cells in [24, 16, 10] {
            let line = TerminalOutput.line(pieces(cells), width: width)
            if line.contains("[") || cells == 10 { return line }
        }
        return TerminalOutput.line(pieces(0), width: width)
    }

    /// The plain progress line (a pipe or a file, every 10 %).
    static func plainProgress(_ p: UpdateProgress) -> String {
        "part \(p.part)/\(p.parts): \(p.percent)% (\(p.bytes)/\(p.total) bytes, \(kB(p.bytesPerSecond)) kB/s)"
    }

    /// The final lines: on success what now runs and the counters; after a failure the counters only when bytes
    /// moved (the error line says the rest).
    static func final(_ summary: UpdateSummary, version: String?, device: String) -> [String] {
        let seconds = String(format: "%.1f", summary.seconds)
        var counters = "\(summary.bytesSent) bytes in \(seconds) s (\(kB(summary.averageBytesPerSecond)) kB/s)"
        var extras: [String] = []
        if summary.bytesResent > 0 { extras.append("\(summary.bytesResent) resent") }
        if summary.reconnects > 0 { extras.append("\(summary.reconnects) reconnect(s)") }
        if summary.partsSkipped > 0 { extras.append("\(summary.partsSkipped) part(s) already there") }
        if !extras.isEmpty { counters += ", " + extras.joined(separator: ", ") }
        guard summary.success else {
            guard summary.bytesSent > 0 || summary.reconnects > 0 else { return [] }
            return ["Stopped after \(counters)"]
        }
        // Two short lines rather than one that wraps at 80 columns.
        let runs = version.map { "\(device) now runs \($0)" } ?? "\(device) is updated"
        var lines = ["Done: \(runs)", "Sent \(counters)"]
        if let message = summary.message { lines.append(message) }
        return lines
    }

    /// What a package installs, in words ("application version 2", "MCUboot image 2.0.0"), or nil when it does not
    /// say (a debug package's 0xFFFFFFFF, a SoftDevice alone).
    static func version(packagePath: String, scope: PartScope) -> String? {
        guard let data = FileManager.default.contents(atPath: packagePath) else { return nil }
        let bytes = [UInt8](data)
        if MCUbootPackage.looksLikeMCUboot(bytes) {
            guard let package = try? MCUbootPackage(bytes: bytes, name: packagePath) else { return nil }
            let versions = package.parts.map { "\($0.image.header.version)" }
            return versions.isEmpty ? nil : "image version " + Array(Set(versions)).sorted().joined(separator: ", ")
        }
        guard let package = try? FirmwarePackage(bytes: bytes) else { return nil }
        var said: [String] = []
        func known(_ value: UInt32?) -> UInt32? { value.flatMap { $0 == 0xFFFF_FFFF ? nil : $0 } }
        if scope != .application, let bootloader = package.part(.softdeviceBootloader) ?? package.part(.bootloader),
            let version = known(bootloader.initCommand?.fwVersion)
        {
            said.append("bootloader version \(version)")
        }
        if scope != .system, let application = package.part(.application),
            let version = known(application.initCommand?.fwVersion ?? application.legacyInit?.applicationVersion)
        {
            said.append("application version \(version)")
        }
        return said.isEmpty ? nil : said.joined(separator: " and ")
    }

    static func kB(_ bytesPerSecond: Int) -> String { String(format: "%.1f", Double(bytesPerSecond) / 1000) }
}
