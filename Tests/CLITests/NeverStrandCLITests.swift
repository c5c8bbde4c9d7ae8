import Foundation
import Testing

@testable import BledfuCLI

/// Issue 19 points 3 and 7 through the binary against a `bledfu simulate` bracelet: a package for another hardware
/// version is refused before the jump (exit 48, one line, the device still in its application); `device info` and
/// `device reset`; a capture of a flash with a jump has both links with their connections and disconnections, and
/// tshark and `btmon -r` (BlueZ 5.66) read it.
@Suite(.serialized, .timeLimit(.minutes(10))) struct NeverStrandCLITests {
    /// The bracelet's mode once its status file says `mode` (written asynchronously: a bounded wait, 10 s, without
    /// holding a thread).
    static func mode(_ simulator: FlashSimulator, becomes mode: String) async -> String? {
        var last: String?
        await OffPool.poll(timeout: .seconds(10)) {
            last = simulator.status()?["mode"] as? String
            return last == mode
        }
        return last
    }

    static func sample(_ name: String) -> String {
        CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/\(name)").path
    }

    @Test func anotherHardwareVersionIsRefusedBeforeTheJump() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let result = try await CLIRunner.run([
            "flash", Self.sample("sensor-app-v2.zip"), "--adapter", "virtual:\(simulator.radio)", "--device",
            FlashFixture.device, "--state-dir", directory.appendingPathComponent("state").path,
        ])
        #expect(result.status == 48, "\(result.stderr)")
        #expect(
            result.errorLines.last
                == "bledfu: error: the device would refuse sensor-app-v2.zip: application is for hardware version 52840,"
                + " the device is hardware revision 52 (\"52\"); nothing was sent, the device still runs its application",
            "\(result.stderr)")
        let status = simulator.status()
        #expect(status?["mode"] as? String == "app")
        // Nothing reached the bootloader: no control point write, no init command stored.
        #expect(((status?["counters"] as? [String: Any])?["control_point_writes"] as? Int) == 0, "\(String(describing: status))")

        // `device info` with the same package says so and ends with the same exit code; with the right one it says
        // what the update would do.
        let info = try await CLIRunner.run([
            "device", "info", FlashFixture.device, "--adapter", "virtual:\(simulator.radio)", "--package",
            Self.sample("sensor-app-v2.zip"),
        ])
        #expect(info.status == 48, "\(info.stderr)")
        #expect(info.stdout.contains("refused: application is for hardware version 52840"), "\(info.stdout)")
        let good = try await CLIRunner.run([
            "device", "info", FlashFixture.device, "--adapter", "virtual:\(simulator.radio)", "--package",
            Self.sample("bracelet-app-v2.zip"),
        ])
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.lines.first == "\(FlashFixture.device): Secure DFU; the device runs its application (it can jump into its bootloader)", "\(good.stdout)")
        #expect(good.stdout.contains("nRF52832 (hardware 52, firmware 1), bledfu virtual device"), "\(good.stdout)")
        #expect(good.stdout.contains("with bracelet-app-v2.zip: application 1 → 2"), "\(good.stdout)")
        #expect(good.stdout.contains("not checked: application: the SoftDevice (sd_req 0xB7)"), "\(good.stdout)")
    }

    /// A flash cut off in the bootloader (no reconnects) leaves the device there; `device reset` with the
    /// application's address finds it at address + 1, sends Abort and finds it back in its application.
    @Test func deviceResetBringsALeftDeviceBack() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory, extraArguments: ["--fault", "disconnect-after-bytes=8000"])
        defer { simulator.stop() }
        let flash = try await CLIRunner.run([
            "flash", Self.sample("bracelet-app-v2.zip"), "--adapter", "virtual:\(simulator.radio)", "--device",
            FlashFixture.device, "--state-dir", directory.appendingPathComponent("state").path, "--reconnect-attempts", "0",
        ])
        #expect(flash.status == 43, "\(flash.stderr)")
        #expect(await Self.mode(simulator, becomes: "bootloader") == "bootloader")
        let info = try await CLIRunner.run(["device", "info", FlashFixture.device, "--adapter", "virtual:\(simulator.radio)"])
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.lines.first == "C6:05:04:03:02:02: Secure DFU; the device waits in its bootloader", "\(info.stdout)")
        let reset = try await CLIRunner.run(["device", "reset", FlashFixture.device, "--adapter", "virtual:\(simulator.radio)"])
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(reset.lines == ["the device is back in its application (\(FlashFixture.device))"], "\(reset.stdout)")
        #expect(await Self.mode(simulator, becomes: "app") == "app")
    }

    static let tshark = "/usr/bin/tshark"
    static let btmon = "/usr/bin/btmon"

    /// A capture of a flash with a jump: the application's link and the bootloader's, each with its LE Connection
    /// Complete (peer address, handle) and Disconnection Complete; tshark decodes every record (no malformed packet)
    /// and tells the links apart; `btmon -r` (5.66, no hci0 here) reads the file to its end, characteristic discovery
    /// included.
    @Test(
        .enabled(
            if: (FileManager.default.isExecutableFile(atPath: Self.tshark) && FileManager.default.isExecutableFile(atPath: Self.btmon))
                || ProcessInfo.processInfo.environment["CI"] == "true",
            "tshark or btmon is not installed (tools/setup)"))
    func captureOfAJumpReadsInTsharkAndBtmon() async throws {
        let directory = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try await FlashSimulator(directory: directory)
        defer { simulator.stop() }
        let capture = directory.appendingPathComponent("flash.btsnoop").path
        let result = try await CLIRunner.run([
            "flash", Self.sample("bracelet-app-v2.zip"), "--adapter", "virtual:\(simulator.radio)", "--device",
            FlashFixture.device, "--state-dir", directory.appendingPathComponent("state").path, "--capture", capture,
        ], timeout: 120)
        #expect(result.status == 0, "\(result.stderr)")

        let events = try await CLIRunner.runTool(
            Self.tshark,
            ["-r", capture, "-Y", "bthci_evt", "-T", "fields", "-e", "frame.number", "-e", "bthci_evt.code", "-e",
             "bthci_evt.connection_handle", "-e", "bthci_evt.bd_addr"])
        let rows = events.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        let connections = rows.filter { $0.count > 3 && $0[1] == "0x3e" }
        let disconnections = rows.filter { $0.count > 1 && $0[1] == "0x05" }
        #expect(connections.count >= 2 && disconnections.count == connections.count, "\(rows)")
        let addresses = connections.map { $0[3].uppercased() }
        #expect(addresses.first == "C6:05:04:03:02:01" && addresses.contains("C6:05:04:03:02:02"), "\(addresses)")
        // Every ATT record belongs to one of those connections (Wireshark's "connect in" frame) and goes to that
        // connection's peer: the application's link and the bootloader's are told apart.
        let peers = Dictionary(uniqueKeysWithValues: connections.map { ($0[0], $0[3].lowercased()) })
        let acl = try await CLIRunner.runTool(
            Self.tshark,
            ["-r", capture, "-Y", "btatt && bthci_acl.dst.bd_addr != 00:00:00:00:00:00", "-T", "fields", "-e",
             "bthci_acl.connect_in", "-e", "bthci_acl.dst.bd_addr"])
        let sent = acl.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(!sent.isEmpty)
        #expect(sent.allSatisfy { $0.count == 2 && peers[$0[0]] == $0[1] }, "\(sent.prefix(5)) vs \(peers)")
        #expect(Set(sent.map { $0[1] }).count >= 2)
        let malformed = try await CLIRunner.runTool(Self.tshark, ["-r", capture, "-Y", "_ws.malformed || _ws.expert.severity == error"])
        #expect(malformed.isEmpty, "\(malformed)")
        // The DFU is decoded on the bootloader's link (its characteristics discovered with Read By Type Requests).
        let verbose = try await CLIRunner.runTool(Self.tshark, ["-r", capture, "-V"])
        #expect(verbose.contains("UUID: Characteristic (0x2803)"))
        // Control Point writes carry their characteristic's UUID (learned from the discovery).
        #expect(verbose.contains("[UUID: 8ec90001f3154f609fb8838830daea50]"), "the DFU Control Point is not named")

        let output = directory.appendingPathComponent("btmon.txt")
        let btmon = try SpawnedProcess(URL(fileURLWithPath: Self.btmon), ["-r", capture], stdout: output)
        await btmon.waitForExit(timeout: 120)
        let decoded = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        // 0 only for an exit with code 0 (a signal reads as 128 + its number).
        #expect(btmon.terminationStatus == 0, "btmon ended with \(btmon.terminationStatus)")
        #expect(decoded.components(separatedBy: "LE Connection Complete").count - 1 == connections.count, "\(decoded.prefix(2000))")
        #expect(decoded.contains("Peer address: C6:05:04:03:02:02"))
        #expect(decoded.components(separatedBy: "Disconnect Complete").count - 1 == disconnections.count)
        #expect(decoded.contains("ATT: Write Command (0x52)"))
        // The requests btmon 5.66 crashes on without a registered connection are in the file, and decoded.
        #expect(decoded.contains("Attribute type: Characteristic (0x2803)"), "\(decoded.prefix(3000))")
    }
}
