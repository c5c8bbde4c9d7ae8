import ArgumentParser
import Foundation
import Testing

@testable import BledfuCLI

/// Options and selection as BLE users expect (issue 19 point 4): negative dBm in the plain form, `scan` sorted by
/// RSSI with assigned names, `--name` that several devices answer to is an error listing them (or `--strongest`),
/// `--min-rssi` on flash. Three devices of tools/example-virtual-device.py advertise "Sensor-…" at different RSSIs.
@Suite(.serialized, .timeLimit(.minutes(5))) struct DeviceSelectionTests {
    /// Three example devices on one radio: -70, -45 and -60 dBm.
    final class Sensors {
        static let devices: [(address: String, name: String, rssi: Int)] = [
            ("C0:FF:EE:00:00:A1", "Sensor-A", -70), ("C0:FF:EE:00:00:B2", "Sensor-B", -45), ("C0:FF:EE:00:00:C3", "Sensor-C", -60),
        ]
        let radio: URL
        var processes: [SpawnedProcess] = []

        init() async throws {
            radio = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-sel-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
            for device in Self.devices {
                let process = try SpawnedProcess(
                    URL(fileURLWithPath: "/usr/bin/env"),
                    [
                        "python3", CLIRunner.repositoryRoot.appendingPathComponent("tools/example-virtual-device.py").path,
                        "--radio", radio.path, "--address", device.address, "--name", device.name, "--rssi", "\(device.rssi)",
                    ])
                processes.append(process)
            }
            for device in Self.devices {
                let adv = radio.appendingPathComponent(device.address.replacingOccurrences(of: ":", with: "-") + ".adv")
                await OffPool.poll(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: adv.path) }
            }
        }

        var adapter: String { "virtual:\(radio.path)" }

        // Bounded (SIGTERM'd children): deinit cannot await.
        deinit {
            for process in processes { process.child.terminateBlocking() }
            try? FileManager.default.removeItem(at: radio)
        }
    }

    @Test func negativeValuesTakeThePlainForm() throws {
        let scan = try ScanCommand.parse(["--min-rssi", "-60"])
        #expect(scan.minRssi == -60)
        let flash = try FlashCommand.parse(["app.zip", "--name", "Sensor", "--min-rssi", "-60", "--strongest"])
        #expect(flash.minRssi == -60 && flash.strongest)
        #expect(throws: (any Error).self) { try FlashCommand.parse(["app.zip", "--device", "C0:FF:EE:00:00:01", "--strongest"]) }
    }

    @Test func scanIsSortedByRSSIAndFiltersWithANegativeFloor() async throws {
        let sensors = try await Sensors()
        let all = try await CLIRunner.run(["scan", "--adapter", sensors.adapter, "--duration", "1"])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.lines.map { String($0.prefix(17)) } == ["C0:FF:EE:00:00:B2", "C0:FF:EE:00:00:C3", "C0:FF:EE:00:00:A1"], "\(all.stdout)")
        #expect(all.lines.first?.contains("-45 dBm") == true)
        let strong = try await CLIRunner.run(["scan", "--adapter", sensors.adapter, "--duration", "1", "--min-rssi", "-65"])
        #expect(strong.status == 0, "\(strong.stderr)")
        #expect(strong.lines.map { String($0.prefix(17)) } == ["C0:FF:EE:00:00:B2", "C0:FF:EE:00:00:C3"], "\(strong.stdout)")
        #expect(strong.stderr.contains("2 device(s) found"))
        let quiet = try await CLIRunner.run(["scan", "--adapter", sensors.adapter, "--duration", "1", "-q"])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty && quiet.lines.count == 3, "\(quiet.stdout)\(quiet.stderr)")
    }

    /// On a terminal (tmux) the table is drawn live and stays sorted; nothing of an earlier drawing is left.
    @Test func liveScanOnATerminalIsSorted() async throws {
        guard TmuxScreen.available else {
            #expect(ProcessInfo.processInfo.environment["CI"] != "true", "tmux is missing (tools/setup installs it)")
            return
        }
        let sensors = try await Sensors()
        let words = [CLIRunner.binary.path, "scan", "--adapter", sensors.adapter, "--duration", "2"]
        let screen = try TmuxScreen(width: 80, height: 24, command: words.map(TmuxScreen.quote).joined(separator: " "))
        let end = try await screen.watch(timeout: 60) { lines in lines.contains { $0.hasPrefix("[exit") } }
        let rows = end.lines.filter { $0.hasPrefix("C0:FF:EE:") }.map { String($0.prefix(17)) }
        #expect(rows == ["C0:FF:EE:00:00:B2", "C0:FF:EE:00:00:C3", "C0:FF:EE:00:00:A1"], "\(end.lines.joined(separator: "\n"))")
        #expect(end.lines.contains("[exit 0]"))
    }

    @Test func aNameSeveralDevicesAnswerToIsAnErrorListingThem() async throws {
        let sensors = try await Sensors()
        let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/sensor-app-v2.zip").path
        let result = try await CLIRunner.run(["flash", sample, "--adapter", sensors.adapter, "--name", "Sensor", "--scan-timeout", "5"])
        #expect(result.status == 23, "\(result.stderr)")
        #expect(result.errorLines.count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("bledfu: error: --name 'Sensor' matches 3 devices: C0:FF:EE:00:00:B2 'Sensor-B' -45 dBm"), "\(result.stderr)")
        for device in Sensors.devices { #expect(result.stderr.contains(device.address)) }
        // Above -50 dBm only Sensor-B is heard: no ambiguity.
        let floor = try await CLIRunner.run([
            "flash", sample, "--adapter", sensors.adapter, "--name", "Sensor", "--min-rssi", "-50", "--scan-timeout", "5", "--json",
            "--timeout", "2", "--state-dir", sensors.radio.appendingPathComponent("state").path,
        ])
        #expect(floor.status != 23, "\(floor.stderr)")
        #expect(Self.found(floor) == "C0:FF:EE:00:00:B2", "\(floor.stdout)")
        // Nobody at -30 dBm or stronger: device not found.
        let none = try await CLIRunner.run(["flash", sample, "--adapter", sensors.adapter, "--name", "Sensor", "--min-rssi", "-30", "--scan-timeout", "2"])
        #expect(none.status == 17, "\(none.stderr)")
        #expect(none.stderr.contains("at -30 dBm or stronger"), "\(none.stderr)")
    }

    @Test func strongestTakesTheLoudest() async throws {
        let sensors = try await Sensors()
        let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/sensor-app-v2.zip").path
        let result = try await CLIRunner.run([
            "flash", sample, "--adapter", sensors.adapter, "--name", "Sensor", "--strongest", "--scan-timeout", "5", "--json",
            "--timeout", "2", "--state-dir", sensors.radio.appendingPathComponent("state").path,
        ])
        #expect(result.status != 23, "\(result.stderr)")
        #expect(Self.found(result) == "C0:FF:EE:00:00:B2", "\(result.stdout)")
    }

    /// The address of the `found` state event.
    static func found(_ result: CLIRunner.Result) -> String? {
        CLIRunner.events(result).first { $0["state"] as? String == "found" }?["address"] as? String
    }
}
