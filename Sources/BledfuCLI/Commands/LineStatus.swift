import ArgumentParser
import BledfuKit
import Batch
import Foundation
import LineStore

/// `bledfu line status`: the line at a glance.
struct LineStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print the line at a glance: stations alive, devices done/failed/in flight, yield, devices per hour.",
        discussion: BatchExit.helpText)

    @OptionGroup var options: LineDatabaseOptions
    @Flag(name: .long, help: "Print the snapshot as JSON.") var json = false

    func run() async throws {
        let log = try await LineStatus.open(options)
        let snapshot: LineSnapshot
        do {
            snapshot = try await log.snapshot(batch: options.line, at: Date())
        } catch {
            await log.close()
            throw CLIError(error)
        }
        await log.close()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            print(String(decoding: (try? encoder.encode(snapshot)) ?? Data(), as: UTF8.self))
        } else {
            print(Self.render(snapshot, database: log.path), terminator: "")
        }
    }

    /// Opens the database the options name (a missing SQLite file is an error, not a new empty log).
    static func open(_ options: LineDatabaseOptions) async throws(CLIError) -> BatchLog {
        let state = options.stateDir.map { URL(fileURLWithPath: $0) } ?? JournalFileStore.defaultDirectory()
        let database = options.db ?? state.appendingPathComponent("batch.sqlite").path
        do {
            return try await BatchLog.open(location: database, mustExist: true)
        } catch {
            throw CLIError(error)
        }
    }

    static func render(_ s: LineSnapshot, database: String) -> String {
        let alive = s.stations.filter(\.alive)
        var text = "line \(s.batch ?? "(all)") in \(database)\n"
        text += "stations: \(alive.count) alive of \(s.stations.count)\n"
        for station in s.stations {
            let state = station.alive ? "alive" : (station.state == "stopped" ? "stopped" : "silent")
            text += String(
                format: "  %@ %@ on %@ [%@], heartbeat %.1f s ago, %d in flight, %d finished\n", station.name, state, station.host,
                station.adapters, station.secondsSinceHeartbeat, station.inFlight, station.finished)
        }
        let yield = s.yield.map { String(format: "%.1f %%", $0 * 100) } ?? "-"
        text += "devices: \(s.total): done \(s.done), skipped \(s.skipped), failed \(s.failed), in flight \(s.running), pending \(s.pending)\n"
        text += "yield \(yield), \(String(format: "%.0f", s.devicesPerHour)) devices/h\n"
        for device in s.inFlight {
            text += "  \(device.address) \(device.name ?? "") \(device.station ?? "-")/\(device.adapter ?? "-") #\(device.attempt) \(device.stage ?? "-") \(device.percent)%\n"
        }
        for failure in s.failures {
            text += "  failed \(failure.address) \(failure.name ?? ""): \(failure.error ?? "-")\n"
        }
        return text
    }
}
