import DFUPackage
import Foundation
import Testing

/// A temporary line for the batch tests: a radio directory shared by several `bledfu simulate` children (each
/// with its own profiles and faults), a plan, a state directory and a database.
final class BatchLine {
    let directory: URL
    let radio: URL
    let status: URL
    let state: URL
    var database: URL { directory.appendingPathComponent("line.sqlite") }
    private(set) var simulators: [SimulatorProcess] = []

    init() throws {
        directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("bledfu-batch-\(UUID().uuidString.prefix(8))")
        radio = directory.appendingPathComponent("radio")
        status = directory.appendingPathComponent("status")
        state = directory.appendingPathComponent("state")
        for url in [radio, status, state] { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
    }

    deinit { cleanUp() }

    func cleanUp() {
        // Bounded (SIGTERM'd children, at most 10 s each): called from `defer` and `deinit`, which cannot await.
        for simulator in simulators { simulator.process.child.terminateBlocking() }
        simulators = []
        try? FileManager.default.removeItem(at: directory)
    }

    /// A copy of a profile in Firmware/ with another name and base address (for a second simulator on the radio).
    func profile(_ base: String, name: String, address: String) throws -> String {
        let url = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/\(base).json")
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        object["name"] = name
        object["address"] = address
        let path = directory.appendingPathComponent("\(name).json")
        try JSONSerialization.data(withJSONObject: object).write(to: path)
        return path.path
    }

    /// Starts `bledfu simulate` with these devices and options on the shared radio.
    func simulate(_ devices: [String], _ options: [String] = [], speedup: Int) throws {
        let arguments = devices.flatMap { ["--device", $0] } + ["--speedup", "\(speedup)", "--status-dir", status.path] + options
        let simulator = try SimulatorProcess(arguments, radio: radio)
        simulators.append(simulator)
    }

    /// Waits (bounded) until `count` devices advertise.
    func waitForDevices(_ count: Int) async throws {
        let ok = await simulators.last?.waitUntil(timeout: 60) {
            ((try? FileManager.default.contentsOfDirectory(atPath: radio.path)) ?? []).filter { $0.hasSuffix(".adv") }.count >= count
        }
        guard ok == true else {
            throw FlashFixture.Failure("only some devices advertise: \(simulators.map(\.stderr).joined(separator: "\n"))")
        }
    }

    /// Writes a plan for both sample packages with discovery rules for `expect` devices.
    func writePlan(expect: Int, connections: Int, adapters: Int = 1, retries: Int = 1, stopAfter: Int = 10, rebootDelay: Double = 0.1) throws -> String {
        let samples = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples").path
        var text = "adapters:\n"
        for _ in 0..<adapters { text += "  - name: virtual:\(radio.path)\n    connections: \(connections)\n" }
        text += """
            classes:
              bracelet:
                package: \(samples)/bracelet-app-v2.zip
              sensor:
                package: \(samples)/sensor-app-v2.zip
            discover:
              duration: 30
              expect: \(expect)
              rules:
                - class: bracelet
                  name_prefix: Bracelet
                  buttonless: true
                - class: sensor
                  name_prefix: Sensor
                  service: FE59
            policies:
              retries: \(retries)
              stop_after_failures: \(stopAfter)
            flash:
              keys: [\(FlashFixture.publicKey.path)]
              reboot_delay: \(rebootDelay)
              scan_timeout: 20
              timeout: 20

            """
        let url = directory.appendingPathComponent("line.yaml")
        try Data(text.utf8).write(to: url)
        return url.path
    }

    var batchArguments: [String] { ["--state-dir", state.path, "--db", database.path] }

    /// `bledfu batch report --format json`, decoded: records and attempts per address.
    func report() async throws -> [String: (record: [String: Any], attempts: [[String: Any]])] {
        let result = try await CLIRunner.run(["batch", "report", "--db", database.path, "--format", "json"])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let devices = try #require(object["devices"] as? [[String: Any]])
        var out: [String: (record: [String: Any], attempts: [[String: Any]])] = [:]
        for device in devices {
            let record = try #require(device["record"] as? [String: Any])
            let address = try #require(record["address"] as? String)
            #expect(out[address] == nil, "two records for \(address)")
            out[address] = (record, device["attempts"] as? [[String: Any]] ?? [])
        }
        return out
    }

    /// Every device's status file (`DeviceState` JSON) by identity address.
    func deviceStates() -> [String: [String: Any]] {
        var states: [String: [String: Any]] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: status.path)) ?? [] where name.hasSuffix(".json") {
            // Keyed by the identity address in the file name (a device in its bootloader may advertise another).
            guard let data = FileManager.default.contents(atPath: status.appendingPathComponent(name).path),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { continue }
            states[String(name.dropLast(".json".count)).replacingOccurrences(of: "-", with: ":")] = object
        }
        return states
    }

    /// Waits (bounded, 3 s, without holding a thread) until the device's status file shows the application with
    /// this SHA-256.
    func waitForApplication(_ address: String, sha256: String) async -> [String: Any]? {
        var last: [String: Any]?
        await OffPool.poll(timeout: .seconds(3)) {
            last = deviceStates()[address]
            guard let last else { return false }
            return Self.applicationSHA(last) == sha256 && last["mode"] as? String == "app"
        }
        return last
    }

    static func applicationSHA(_ state: [String: Any]) -> String? {
        (((state["installed"] as? [String: Any])?["application"] as? [String: Any])?["sha256"] as? String)?.lowercased()
    }

    static func updatesCompleted(_ state: [String: Any]?) -> Int? {
        (state?["counters"] as? [String: Any])?["updates_completed"] as? Int
    }

    /// SHA-256 of a sample package's application image.
    static func imageSHA(_ sample: String) async throws -> String {
        let url = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/\(sample)")
        let package = try FirmwarePackage(contentsOf: url)
        let image = try #require(package.part(.application)?.image)
        let file = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("image-\(UUID().uuidString.prefix(8)).bin")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(image).write(to: file)
        let output = try await CLIRunner.runTool("/usr/bin/sha256sum", [file.path])
        return String(output.split(separator: " ").first ?? "").lowercased()
    }
}
