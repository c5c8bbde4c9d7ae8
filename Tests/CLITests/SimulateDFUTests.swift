import Foundation
import Testing

/// A whole update on the simulator: the Firmware/samples package (signed with the test key the profiles trust),
/// the buttonless jump (the device moves to address + 1 and back), a fault the simulator logs, and the new version
/// in GATT and in the status file.
@Suite(.serialized, .timeLimit(.minutes(5))) struct SimulateDFUTests {
    static let bracelet = "C6:05:04:03:02:01"
    static let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/bracelet-app-v2.zip")

    func decode(_ line: Substring) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: sample.path), "run tools/make-samples first"))
    func sampleUpdateSurvivesALoggedFaultAndMovesTheEndpointAcrossTheJump() async throws {
        let simulator = try SimulatorProcess([
            "--device", "bracelet", "--speedup", "1000", "--json", "--fault", "disconnect-after-bytes=8192,seed=3",
        ])
        defer { simulator.cleanUp() }
        let radio = "virtual:\(simulator.radio.path)"
        #expect(await simulator.waitUntil { simulator.files(".adv").count == 1 }, "no advertisement: \(simulator.stderr)")

        let flash = try await CLIRunner.run(
            ["flash", "--adapter", radio, "--device", Self.bracelet, Self.sample.path], timeout: 120)
        #expect(flash.status == 0, "\(flash.stdout)\n\(flash.stderr)")

        let read = try await CLIRunner.run(["gatt", "read", "--adapter", radio, "--device", Self.bracelet, "2A26"])
        #expect(read.stdout.hasSuffix(": 32 \"2\"\n"), "application version 2 installed: \(read.stdout) \(read.stderr)")

        let status = try await CLIRunner.run(["simulate", "status", "--adapter", radio, "--json"])
        let lines = status.stdout.split(separator: "\n").compactMap(decode)
        let state = try #require(lines.first?["state"] as? [String: Any], "\(status.stdout)")
        let counters = state["counters"] as? [String: Any]
        #expect(counters?["updates_completed"] as? Int == 1, "\(state)")
        #expect(counters?["faults_fired"] as? Int == 1, "\(state)")

        #expect(await simulator.stop() == 0, "\(simulator.stderr)")
        let events = simulator.stdout.split(separator: "\n").compactMap(decode)
        let fault = try #require(events.first { $0["event"] as? String == "fault" }, "\(simulator.stdout)")
        #expect(fault["kind"] as? String == "disconnect")
        #expect((fault["bytes_received"] as? Int ?? 0) >= 8192)
        // The bootloader advertised at address + 1 (no bonds), then the application came back at its own address.
        let advertised = events.filter { $0["event"] as? String == "advertising" }
            .compactMap { $0["address"] as? String }
        #expect(advertised.contains("C6:05:04:03:02:02"), "\(advertised)")
        #expect(advertised.last == Self.bracelet, "\(advertised)")
        #expect(simulator.files(".sock").isEmpty)
    }
}
