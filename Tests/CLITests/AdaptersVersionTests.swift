import BLECore
import BlueZTransport
import Foundation
import Testing
import VirtualRadio

@testable import BledfuCLI

/// `bledfu --version` and `bledfu adapters` (issue 20 points 2 and 3).
@Suite(.timeLimit(.minutes(3))) struct AdaptersVersionTests {
    /// The version and the commit the binary was built from: a test build is not stamped ("unknown commit");
    /// tools/package stamps its release build and checks that the installed binary names HEAD.
    @Test func versionNamesTheVersionAndTheCommit() async throws {
        let result = try await CLIRunner.run(["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        let line = result.stdout.trimmingCharacters(in: .newlines)
        #expect(line == BledfuCommand.versionText)
        let stamp = try #require(line.firstMatch(of: /^(\d+\.\d+\.\d+) \((commit [0-9a-f]{7,40}(-dirty)?|unknown commit)\)$/), "\(line)")
        #expect(String(stamp.1) == BledfuCommand.version)
        // The CHANGELOG's newest release is this version.
        let changelog = try String(contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let release = changelog.firstMatch(of: /\n## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}\n/)
        #expect(release.map { String($0.1) } == BledfuCommand.version, "CHANGELOG.md has no release section for \(BledfuCommand.version)")
    }

    /// tools/stamp-commit (what tools/package runs on the copy it packages) writes the commit into the binary's
    /// slot: the stamped copy names it, nothing is rebuilt, and a slot stamped already is refused.
    @Test func aStampedCopyNamesItsCommit() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-stamp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let copy = directory.appendingPathComponent("bledfu")
        // Copied by cp, not by this process: a descriptor of ours open for writing on the copy would be inherited by
        // any child another test forks meanwhile (Foundation does not open it close-on-exec), and executing the copy
        // would fail with ETXTBSY ("Text file busy") while that child lives.
        let copied = try await CLIRunner.run([CLIRunner.binary.path, copy.path], executable: URL(fileURLWithPath: "/bin/cp"))
        try #require(copied.status == 0, "\(copied.stderr)")
        let tool = URL(fileURLWithPath: CLIRunner.repositoryRoot.appendingPathComponent("tools/stamp-commit").path)
        let first = try await CLIRunner.run([copy.path, "0123456789ab-dirty"], executable: tool)
        #expect(first.status == 0, "\(first.stderr)")
        let stamped = try await CLIRunner.run(["--version"], executable: copy)
        #expect(stamped.stdout == "\(BledfuCommand.version) (commit 0123456789ab-dirty)\n", "\(stamped.stderr)")
        let again = try await CLIRunner.run([copy.path, "fedcba987654"], executable: tool)
        #expect(again.status != 0 && again.stderr.contains("stamped already"), "\(again.stderr)")
        #expect(try await CLIRunner.run(["--version"], executable: copy).stdout == stamped.stdout)
        // The unstamped binary says so.
        #expect(try await CLIRunner.run(["--version"]).stdout == "\(BledfuCommand.version) (unknown commit)\n")
    }

    /// A virtual radio's adapters: `default` and an adapter with a controller profile, with the links each holds
    /// and allows, as a table and as NDJSON.
    @Test func adaptersListsAVirtualRadiosControllers() async throws {
        let radio = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-adapters-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: radio, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: radio) }
        let bcm = try #require(ControllerProfile.presets.first { $0.name == "bcm20702" })
        let station = VirtualController(radio: radio.path, name: "station")
        try station.write(bcm)
        // One link held by this (live) test process.
        let peer = PeerAddress(try #require(BluetoothAddress("C0:FF:EE:00:00:01")), type: .random)
        let token = try await station.reserve(peer: peer, profile: bcm, until: .now + .seconds(30))
        await station.established(token)

        let table = try await CLIRunner.run(["adapters", "--adapter", "virtual:\(radio.path)"])
        #expect(table.status == 0, "\(table.stderr)")
        let lines = table.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(table.stdout)")
        #expect(lines.first?.hasPrefix("ADAPTER") == true)
        let station_ = try #require(lines.first { $0.hasPrefix("virtual:\(radio.path)@station ") })
        #expect(station_.split(separator: " ", omittingEmptySubsequences: true).map(String.init).dropFirst()
            == ["-", "yes", "none", "yes", "1", "7", "virtual", "radio"], "\(station_)")
        let fallback = try #require(lines.first { $0.hasPrefix("virtual:\(radio.path) ") })
        #expect(fallback.contains(" 0 ") && fallback.contains(" \(ControllerProfile.generic.maximumLinks) "), "\(fallback)")

        let json = try await CLIRunner.run(["adapters", "--adapter", "virtual:\(radio.path)", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let objects = try json.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.count == 2)
        let named = try #require(objects.first { $0["name"] as? String == "virtual:\(radio.path)@station" })
        #expect(named["openLinks"] as? Int == 1 && named["linksAllowed"] as? Int == 7 && named["powered"] as? Bool == true)
        #expect(named["address"] is NSNull && named["rfkill"] is NSNull, "absent values are null, not left out")
        await station.release(token)
        let after = try await CLIRunner.run(["adapters", "--adapter", "virtual:\(radio.path)@station", "--json"])
        #expect(after.stdout.contains(#""openLinks":0"#), "\(after.stdout)")
    }

    /// A kernel adapter's row and the notes that answer "why doesn't it see my adapter"; a real controller's link
    /// limit is "not reported".
    @Test func aKernelAdapterRowSaysWhatKeepsItFromWorking() throws {
        let address = try #require(BluetoothAddress("00:1A:7D:DA:71:13"))
        let blocked = AdaptersCommand.row(
            BlueZAdapterStatus(
                info: BlueZAdapterInfo(id: 0, name: "hci0", address: address, isUp: false, supportsLE: true, bus: 1),
                rfkill: RfkillState(index: "rfkill0", softBlocked: true, hardBlocked: false), openLinks: nil))
        #expect(blocked.rfkill == "soft-blocked" && !blocked.powered && blocked.linksAllowed == nil && blocked.bus == "USB")
        #expect(blocked.notes.contains { $0.contains("rfkill unblock bluetooth") }, "\(blocked.notes)")
        #expect(blocked.notes.contains { $0.contains("powered off") }, "\(blocked.notes)")
        let text = AdaptersCommand.table([blocked])
        #expect(text.contains("hci0     00:1A:7D:DA:71:13  no       soft-blocked  yes  -      not reported  USB"), "\(text)")
        let fine = AdaptersCommand.row(
            BlueZAdapterStatus(
                info: BlueZAdapterInfo(id: 1, name: "hci1", address: address, isUp: true, supportsLE: true, bus: 1),
                rfkill: RfkillState(index: "rfkill1", softBlocked: false, hardBlocked: false), openLinks: 2))
        #expect(fine.notes.isEmpty && fine.openLinks == 2 && fine.rfkill == "unblocked")
    }

    /// `--adapter` completes the kernel's adapters (not its links, hci0:64) and `virtual:`.
    @Test func adapterCompletionListsTheKernelsAdapters() throws {
        let sysfs = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-sysfs-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: sysfs) }
        for name in ["hci1", "hci0", "hci0:64"] {
            try FileManager.default.createDirectory(at: sysfs.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        #expect(AdapterCompletion.candidates(sysfs: sysfs.path) == ["hci0", "hci1", "any", "virtual:"])
    }
}
