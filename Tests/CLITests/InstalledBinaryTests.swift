@testable import BLECore
import Foundation
import SimulatorHost
import Testing

@testable import BledfuCLI

/// The binary works away from a checkout (issue 19 point 5): its device profiles are built in, or found installed
/// beside it in `<bin>/../share/bledfu/Firmware`, and the data it carries matches the repository's files.
@Suite(.timeLimit(.minutes(5))) struct InstalledBinaryTests {
    /// A scratch directory outside the checkout, with a copy of the binary at `bin/bledfu`.
    static func installedCopy() async throws -> (root: URL, binary: URL) {
        let root = URL(fileURLWithPath: "/tmp").appendingPathComponent("bledfu-installed-\(UUID().uuidString.prefix(8))")
        let bin = root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let binary = bin.appendingPathComponent("bledfu")
        // By cp: a descriptor of this process open for writing on the copy would be inherited by any child another
        // test forks meanwhile, and executing the copy would fail with ETXTBSY while that child lives.
        let copied = try await CLIRunner.run([CLIRunner.binary.path, binary.path], executable: URL(fileURLWithPath: "/bin/cp"))
        guard copied.status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: copied.stderr]) }
        return (root, binary)
    }

    /// Runs the copy in `directory` (`env -C`) without BLEDFU_FIRMWARE_DIR (`env -u`: the child inherits ours
    /// otherwise), off the pool (``CLIRunner/run(_:environment:timeout:executable:)``).
    static func runCopy(_ binary: URL, in directory: URL, _ arguments: [String]) async throws -> CLIRunner.Result {
        try await CLIRunner.run(
            ["-C", directory.path, "-u", "BLEDFU_FIRMWARE_DIR", binary.path] + arguments, executable: URL(fileURLWithPath: "/usr/bin/env"))
    }

    @Test func aLoneCopyOfTheBinaryHasItsProfilesBuiltIn() async throws {
        let (root, binary) = try await Self.installedCopy()
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(!root.path.hasPrefix(CLIRunner.repositoryRoot.path))
        let result = try await Self.runCopy(binary, in: root, ["simulate", "--describe", "--device", "bracelet"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("Bracelet C6:05:04:03:02:01 random nRF52832"), "\(result.stdout)")
        let unknown = try await Self.runCopy(binary, in: root, ["simulate", "--describe", "--device", "toaster"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("bledfu: error: no device profile 'toaster'"), "\(unknown.stderr)")
        #expect(unknown.stderr.contains("bracelet"), "the error lists the bundled profiles: \(unknown.stderr)")
    }

    /// `<bin>/../share/bledfu/Firmware` (where the Debian package installs them) wins over the built-in copy.
    @Test func profilesInstalledBesideTheBinaryAreUsed() async throws {
        let (root, binary) = try await Self.installedCopy()
        defer { try? FileManager.default.removeItem(at: root) }
        let share = root.appendingPathComponent("share/bledfu/Firmware")
        try FileManager.default.createDirectory(at: share, withIntermediateDirectories: true)
        let original = try String(
            contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("Firmware/bracelet.json"), encoding: .utf8)
        try original.replacingOccurrences(of: "\"Bracelet\"", with: "\"Installed\"")
            .write(to: share.appendingPathComponent("bracelet.json"), atomically: true, encoding: .utf8)
        let result = try await Self.runCopy(binary, in: root, ["simulate", "--describe", "--device", "bracelet"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("Installed C6:05:04:03:02:01"), "\(result.stdout)")
    }

    /// The binary carries Firmware/*.json and the assigned numbers as they are in the repository
    /// (tools/generate-embedded writes them; a stale copy fails here).
    @Test func embeddedDataMatchesTheRepository() throws {
        let firmware = CLIRunner.repositoryRoot.appendingPathComponent("Firmware")
        let names = try FileManager.default.contentsOfDirectory(atPath: firmware.path).filter { $0.hasSuffix(".json") }
        #expect(Set(names.map { String($0.dropLast(".json".count)) }) == Set(BuiltInProfiles.all.keys))
        for name in names {
            let text = try String(contentsOf: firmware.appendingPathComponent(name), encoding: .utf8)
            #expect(BuiltInProfiles.all[String(name.dropLast(".json".count))] == text, "\(name) is stale")
        }
        let tsv = try String(
            contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("Sources/BLECore/Data/assigned-numbers.tsv"),
            encoding: .utf8)
        #expect(AssignedNumbersData.tsv == tsv, "assigned-numbers.tsv is stale (tools/generate-embedded)")
        let parsed = AssignedNumbers.parse(tsv)
        #expect(parsed.bad.isEmpty, "lines that do not parse: \(parsed.bad)")
        #expect(AssignedNumbers.label(try #require(BluetoothUUID("2A19"))) == "2A19 \"Battery Level\"")
        #expect(AssignedNumbers.name(of: try #require(BluetoothUUID("FE59"))) == "Nordic Semiconductor ASA")
        #expect(AssignedNumbers.name(of: try #require(BluetoothUUID("1234"))) == nil)
    }
}
