import Foundation
import Testing

@testable import BledfuCLI

/// What a person reads (issue 19 point 8): `flash` in sentences with the running version at the end, `-q` and `-v`,
/// NDJSON with a `time`, `gatt list` with names and properties in words (arrays in JSON), `gatt subscribe` saying
/// that it waits.
@Suite(.timeLimit(.minutes(5))) struct HumanOutputTests {
    static func flash(_ extra: [String], size: Int = 8192) async throws -> CLIRunner.Result {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let (package, _) = try await FlashFixture.applicationPackage(in: directory, size: size)
        return try await CLIRunner.run([
            "flash", package, "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device,
            "--state-dir", directory.appendingPathComponent("state").path, "--key", FlashFixture.publicKey.path,
        ] + extra, timeout: 120)
    }

    @Test func stepsAreSentencesAndTheLastLineSaysWhatRuns() async throws {
        let result = try await Self.flash([])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.lines
        #expect(lines.first == "Connecting to \(FlashFixture.device)", "\(result.stdout)")
        #expect(lines.contains("Restarting \(FlashFixture.device) into its bootloader"), "\(result.stdout)")
        #expect(lines.contains("Sending part 1 of 1: application, 8192 bytes"), "\(result.stdout)")
        #expect(lines.suffix(2).first == "Done: \(FlashFixture.device) now runs application version 2", "\(result.stdout)")
        #expect(lines.last?.hasPrefix("Sent 8192 bytes in ") == true, "\(result.stdout)")
        #expect(!result.stdout.contains("="), "no key=value log lines: \(result.stdout)")
    }

    @Test func quietPrintsTheFinalLineOnlyAndVerboseEveryPercent() async throws {
        let quiet = try await Self.flash(["-q"])
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(quiet.lines.count == 1 && quiet.lines.first?.hasPrefix("Done: ") == true, "\(quiet.stdout)")
        // Plain output (a pipe): a progress line for every percent reported with -v, every 10 % by default.
        let normal = try await Self.flash([], size: 64 * 1024)
        let verbose = try await Self.flash(["-v"], size: 64 * 1024)
        #expect(normal.status == 0 && verbose.status == 0, "\(normal.stderr)\(verbose.stderr)")
        let normalProgress = normal.lines.filter { $0.hasPrefix("part 1/1: ") }
        let verboseProgress = verbose.lines.filter { $0.hasPrefix("part 1/1: ") }
        #expect(normalProgress.count <= 11, "\(normal.stdout)")
        #expect(verboseProgress.count > normalProgress.count, "\(verbose.stdout)")
        #expect(try await Self.flash(["-q", "-v"]).status == 64)
    }

    /// Every NDJSON line has its RFC 3339 `time`; keys are camelCase (the result's `bytesSent`).
    @Test func ndjsonHasTimesAndOneKeyStyle() async throws {
        let result = try await Self.flash(["--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let events = CLIRunner.events(result)
        #expect(events.count == result.lines.count && events.count > 5)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for event in events {
            let time = event["time"] as? String ?? ""
            #expect(time.hasSuffix("Z") && formatter.date(from: time) != nil, "\(event)")
            #expect(event.keys.allSatisfy { !$0.contains("_") }, "\(event)")
        }
        #expect(events.last?["bytesSent"] as? Int == 8192)
    }

    /// `gatt subscribe --json` says it waits (a `subscribed` event) before the first value.
    @Test func subscribeSaysItWaits() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        // Writing 01 to the buttonless characteristic asks for the bootloader: the device indicates its answer.
        let result = try await CLIRunner.run([
            "gatt", "subscribe", "8EC90003-F315-4F60-9FB8-838830DAEA50", "--adapter", "virtual:\(simulator.radio)",
            "--device", FlashFixture.device, "--json", "--count", "1", "--then-write", "01",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let events = CLIRunner.events(result)
        #expect(events.map { $0["event"] as? String } == ["subscribed", "indication"], "\(result.stdout)")
        #expect(events.first?["kind"] as? String == "indication")
        #expect(events.allSatisfy { $0["time"] is String })
    }

    @Test func gattListNamesStandardUUIDsAndSaysPropertiesInWords() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let base = ["gatt", "list", "--adapter", "virtual:\(simulator.radio)", "--device", FlashFixture.device]
        let text = try await CLIRunner.run(base)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("service FE59 \"Nordic Semiconductor ASA\" handles"), "\(text.stdout)")
        #expect(text.lines.contains { $0.hasPrefix("  characteristic 2A26 \"Firmware Revision String\" value 0x") && $0.hasSuffix("(read)") }, "\(text.stdout)")
        #expect(!text.stdout.contains("[["), "\(text.stdout)")
        let json = try await CLIRunner.run(base + ["--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let characteristics = CLIRunner.events(json).filter { $0["event"] as? String == "characteristic" }
        let revision = try #require(characteristics.first { $0["uuid"] as? String == "2A26" })
        #expect(revision["properties"] as? [String] == ["read"])
        #expect(revision["name"] as? String == "Firmware Revision String")
        #expect(characteristics.allSatisfy { $0["properties"] is [String] })
    }
}
