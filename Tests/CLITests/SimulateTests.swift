import Foundation
import Testing

/// `bledfu simulate` end to end: the simulator runs as a child process on a temporary virtual radio; the other
/// commands (scan, gatt) talk to it through the radio directory.
@Suite(.serialized, .timeLimit(.minutes(5))) struct SimulateTests {
    static let bracelet = "C6:05:04:03:02:01"
    static let firmware = ["BLEDFU_FIRMWARE_DIR": CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path]

    func decode(_ line: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    @Test func describePrintsProfilesAndCeilingsWithoutARadio() async throws {
        let text = try await CLIRunner.run(
            ["simulate", "--describe", "--device", "bracelet", "--device", "sensor"], environment: Self.firmware)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("Bracelet C6:05:04:03:02:01 random nRF52832"))
        #expect(text.stdout.contains("Sensor D2:C3:B4:A5:96:87 random nRF52840"))
        #expect(text.lines.filter { $0.contains("ceiling: write without response") }.count == 2)

        let json = try await CLIRunner.run(
            ["simulate", "--describe", "--json", "--device", "bracelet", "--device", "sensor", "--hw-version", "0x99"],
            environment: Self.firmware)
        #expect(json.status == 0, "\(json.stderr)")
        let all = json.lines.compactMap(decode)
        // Two devices, then the default controller every other adapter has (docs/virtual-radio.md §4.2) and what two
        // profiles' links get on it.
        let events = all.filter { $0["event"] as? String == "device" }
        #expect(events.count == 2)
        let controllers = all.filter { $0["event"] as? String == "controller" }
        #expect(controllers.count == 1)
        #expect(controllers.first?["adapter"] as? String == "*")
        #expect((controllers.first?["controller"] as? [String: Any])?["maximum_links"] as? Int == 5)
        #expect((controllers.first?["shared"] as? [Any])?.count == 2)
        #expect(text.stdout.contains("any other adapter (default controller): generic: 5 links"))
        var ceilings: [String: (Int, Int)] = [:]
        for event in events {
            let ceiling = event["ceiling"] as? [String: Any]
            let profile = event["profile"] as? [String: Any]
            #expect(profile?["hw_version"] as? Int == 0x99, "override applied")
            if let name = event["name"] as? String, let wwr = ceiling?["write_without_response"] as? Int,
                let wr = ceiling?["write_with_response"] as? Int
            {
                ceilings[name] = (wwr, wr)
            }
        }
        // docs/simulator.md: bracelet ≈ 4.9 kB/s, sensor flash-bound ≈ 32.3 kB/s; a request costs 2 intervals.
        let bracelet = try #require(ceilings["Bracelet"])
        let sensor = try #require(ceilings["Sensor"])
        #expect((4_000...6_000).contains(bracelet.0), "\(bracelet)")
        #expect((30_000...35_000).contains(sensor.0), "\(sensor)")
        #expect(bracelet.1 < bracelet.0 && sensor.1 < sensor.0)
    }

    @Test func badArgumentsAreUsageErrors() async throws {
        let unknown = try await CLIRunner.run(
            ["simulate", "--adapter", "virtual:/tmp/bledfu-none", "--device", "no-such-device"],
            environment: Self.firmware)
        #expect(unknown.status == 64, "\(unknown.stderr)")
        #expect(unknown.stderr.contains("no device profile 'no-such-device'"))
        let notVirtual = try await CLIRunner.run(["simulate", "--device", "bracelet"], environment: Self.firmware)
        #expect(notVirtual.status == 64)
        #expect(notVirtual.stderr.contains("virtual:DIR"))
        let badFault = try await CLIRunner.run(
            ["simulate", "--describe", "--device", "bracelet", "--fault", "explode-at=1"], environment: Self.firmware)
        #expect(badFault.status == 64)
        #expect(badFault.stderr.contains("unknown fault 'explode-at'"))
        let collision = try await CLIRunner.run(
            ["simulate", "--describe", "--device", "bracelet", "--device", "bracelet"], environment: Self.firmware)
        #expect(collision.status == 64)
        #expect(collision.stderr.contains("would both use address"))
        let profilePath = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/bracelet.json").path
        let notAKey = try await CLIRunner.run(
            ["simulate", "--describe", "--device", "bracelet", "--public-key", profilePath],
            environment: Self.firmware)
        #expect(notAKey.status == 64)
        #expect(notAKey.stderr.contains("--public-key"))
    }

    @Test func devicesAdvertiseServeGATTWriteStatusAndStopCleanlyOnSIGINT() async throws {
        let simulator = try SimulatorProcess(["--device", "bracelet", "--device", "sensor:2", "--speedup", "1000"])
        defer { simulator.cleanUp() }
        let radio = "virtual:\(simulator.radio.path)"
        #expect(await simulator.waitUntil { simulator.files(".adv").count == 3 }, "no advertisements: \(simulator.stderr)")
        #expect(simulator.files(".sock").count == 3)

        // Scan: the bracelet and both sensors, each with FE59.
        let scan = try await CLIRunner.run(["scan", "--adapter", radio, "--json", "--duration", "0.5"])
        #expect(scan.status == 0, "\(scan.stderr)")
        let seen = scan.lines.compactMap(decode)
        var names: [String: String] = [:]
        for event in seen {
            if let name = event["name"] as? String, let address = event["address"] as? String { names[name] = address }
            #expect((event["services"] as? [String])?.contains("FE59") == true, "\(event)")
        }
        #expect(names["Bracelet"] == Self.bracelet)
        #expect(names["Sensor-1"] == "D2:C3:B4:A5:96:87")
        #expect(names["Sensor-2"] == "D2:C3:B4:A5:97:87", "instance 2: byte 4 + 1")

        // GATT: FE59 with the unbonded buttonless characteristic and the Device Information firmware revision.
        let list = try await CLIRunner.run(["gatt", "list", "--adapter", radio, "--device", Self.bracelet, "--values"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("service FE59"))
        #expect(list.stdout.uppercased().contains("CHARACTERISTIC 8EC90003"))
        #expect(list.stdout.contains("characteristic 2A26"))
        let read = try await CLIRunner.run(["gatt", "read", "--adapter", radio, "--device", Self.bracelet, "2A26"])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout.hasSuffix(": 31 \"1\"\n"), "installed application version 1: \(read.stdout)")

        // Status files: one per device, DeviceState JSON, and `simulate status` reads them.
        let statusDirectory = simulator.radio.appendingPathComponent("status")
        let statusNames = try FileManager.default.contentsOfDirectory(atPath: statusDirectory.path).filter {
            $0.hasSuffix(".json")
        }
        #expect(statusNames.sorted() == ["C6-05-04-03-02-01.json", "D2-C3-B4-A5-96-87.json", "D2-C3-B4-A5-97-87.json"])
        let braceletFile = statusDirectory.appendingPathComponent("C6-05-04-03-02-01.json")
        let braceletStatus = try #require(decode(String(decoding: try Data(contentsOf: braceletFile), as: UTF8.self)))
        #expect(braceletStatus["mode"] as? String == "app")
        #expect((braceletStatus["counters"] as? [String: Any])?["connections"] as? Int ?? 0 >= 2, "\(braceletStatus)")
        let status = try await CLIRunner.run(["simulate", "status", "--adapter", radio, "--json"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.lines.compactMap(decode).count == 3)
        let one = try await CLIRunner.run(["simulate", "status", "--adapter", radio, "--device", "D2:C3:B4:A5:97:87"])
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.lines.count == 1 && one.stdout.contains("Sensor-2 app"), "\(one.stdout)")

        // SIGINT: exit 0, sockets and advertisements removed, status files kept.
        #expect(await simulator.stop(signal: SIGINT) == 0, "\(simulator.stderr)")
        #expect(simulator.files(".sock").isEmpty)
        #expect(simulator.files(".adv").isEmpty)
        #expect(simulator.stderr.contains("stopped"))
        #expect(FileManager.default.fileExists(atPath: braceletFile.path))
    }

    @Test func overridesShowInGATTAndStatePersistsAcrossRunsAndSIGTERMStops() async throws {
        let stateDirectory = URL(fileURLWithPath: "/tmp")
            .appendingPathComponent("bledfu-state-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let first = try SimulatorProcess(
            ["--device", "bracelet", "--app-version", "7", "--state-dir", stateDirectory.path, "--json"])
        defer { first.cleanUp() }
        let radio = "virtual:\(first.radio.path)"
        #expect(await first.waitUntil { first.files(".adv").count == 1 }, "no advertisement: \(first.stderr)")
        let read = try await CLIRunner.run(["gatt", "read", "--adapter", radio, "--device", Self.bracelet, "2A26"])
        #expect(read.stdout.hasSuffix(": 37 \"7\"\n"), "\(read.stdout) \(read.stderr)")
        #expect(await first.stop(signal: SIGTERM) == 0, "\(first.stderr)")
        #expect(first.files(".sock").isEmpty)
        let events = first.stdout.split(separator: "\n").compactMap { decode(String($0)) }
            .compactMap { $0["event"] as? String }
        #expect(events.first == "advertising" && events.contains("ready") && events.last == "stopped", "\(events)")

        // Second run, same state directory, no override: the installed version comes back.
        let second = try SimulatorProcess(
            ["--device", "bracelet", "--state-dir", stateDirectory.path], radio: first.radio)
        defer { second.cleanUp() }
        #expect(await second.waitUntil { second.files(".adv").count == 1 }, "no advertisement: \(second.stderr)")
        let again = try await CLIRunner.run(["gatt", "read", "--adapter", radio, "--device", Self.bracelet, "2A26"])
        #expect(again.stdout.hasSuffix(": 37 \"7\"\n"), "\(again.stdout) \(again.stderr)")
        #expect(await second.stop() == 0)
    }
}
