import Foundation
import Testing

/// `bledfu simulate --adapter hciN`: the argument checks, through the real binary. This machine has no Bluetooth,
/// so only the refusals are tested (exit 64 and one error line naming the problem), and the one valid command
/// line is pointed at an adapter index no machine has.
@Suite(.timeLimit(.minutes(5))) struct SimulateAdapterArgumentTests {
    static let firmware = ["BLEDFU_FIRMWARE_DIR": CLIRunner.repositoryRoot.appendingPathComponent("Firmware").path]

    /// Runs `bledfu simulate arguments` and expects a usage error with one error line that contains `message`.
    func expectUsageError(_ arguments: [String], _ message: String, sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        let result = try await CLIRunner.run(["simulate"] + arguments, environment: Self.firmware, timeout: 30)
        #expect(result.status == 64, "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
        // ArgumentParser's validation prints "Error: ...", the command's own checks "bledfu: error: ...".
        let errorLines = result.errorLines.filter { $0.hasPrefix("Error: ") || $0.hasPrefix("bledfu: error: ") }
        #expect(errorLines.count == 1, "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(
            errorLines.first?.contains(message) == true, "\(arguments): \(result.stderr)",
            sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, "\(arguments): \(result.stdout)", sourceLocation: sourceLocation)
    }

    @Test func aBlueZAdapterServesExactlyOneDevice() async throws {
        try await expectUsageError(["--adapter", "hci0", "--device", "sensor:4"], "a BlueZ adapter (hci0) serves one device")
        try await expectUsageError(
            ["--adapter", "hci1", "--device", "bracelet", "--device", "sensor"], "a BlueZ adapter (hci1) serves one device")
        try await expectUsageError(["--adapter", "hci0"], "name at least one --device")
    }

    @Test(arguments: ["hciX", "hci", "hci-1", "hci65535", "HCI0", "bluetooth0", "virtual:"])
    func malformedAdapterNamesAreRefused(adapter: String) async throws {
        try await expectUsageError(
            ["--adapter", adapter, "--device", "bracelet"],
            "--adapter must be hciN, 'any', or virtual:DIR (got '\(adapter)')")
    }

    @Test func anyIsNoPlaceToAdvertise() async throws {
        try await expectUsageError(["--adapter", "any", "--device", "bracelet"], "needs --adapter virtual:DIR or --adapter hciN")
        try await expectUsageError(["--device", "bracelet"], "needs --adapter virtual:DIR or --adapter hciN")  // default: any
    }

    @Test func conflictingAndBadOptionsWithABlueZAdapter() async throws {
        let plan = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-no-such-plan.json").path
        try await expectUsageError(
            ["--adapter", "hci0", "--device", "bracelet", "--fault", "disconnect-after-bytes=8192", "--fault-plan", plan],
            "use either --fault or --fault-plan, not both")
        try await expectUsageError(["--adapter", "hci0", "--device", "bracelet", "--speedup", "0"], "--speedup must be positive")
        try await expectUsageError(["--adapter", "hci0", "--device", "bracelet", "--timeout", "0"], "--timeout must be between")
        // Checked before any adapter is opened: a bad profile or fault never touches the radio.
        try await expectUsageError(["--adapter", "hci0", "--device", "no-such-device"], "no device profile 'no-such-device'")
        try await expectUsageError(["--adapter", "hci0", "--device", "bracelet", "--fault", "explode-at=1"], "unknown fault 'explode-at'")
        try await expectUsageError(["--adapter", "hci0", "--device", "bracelet", "--hw-version", "0x1FFFFFFFF"], "--hw-version")
    }

    @Test("--describe --controller states the adapter's controller, its sources and what its links get together")
    func describeStatesTheControllerModel() async throws {
        let result = try await CLIRunner.run(
            ["simulate", "--describe", "--device", "bracelet", "--controller", "default=bcm20702"],
            environment: Self.firmware, timeout: 30)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("adapter default: bcm20702: 7 links, then HCI 0x09 Connection Limit Exceeded (EMLINK)"), "\(result.stdout)")
        #expect(result.stdout.contains("sources: Broadcom BCM20702"), "\(result.stdout)")
        // Seven bracelets (each about an eighth of the radio) nearly fill it: each keeps most of its rate.
        #expect(result.stdout.contains("7 × Bracelet: each at 100 % of its rate alone"), "\(result.stdout)")
        try await expectUsageError(
            ["--describe", "--device", "bracelet", "--controller", "default=nosuch"], "unknown controller 'nosuch'")
        try await expectUsageError(
            ["--describe", "--device", "bracelet", "--controller", "default=generic:links=0"], "controller links must be 1-64")
        try await expectUsageError(
            ["--describe", "--device", "bracelet", "--controller", "bad name=generic"], "expected ADAPTER=PROFILE")
    }

    @Test func describeNeedsNoAdapterAndIgnoresTheOneDeviceRule() async throws {
        let result = try await CLIRunner.run(
            ["simulate", "--adapter", "hci0", "--describe", "--device", "sensor:2"], environment: Self.firmware)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stdout.isEmpty)
    }

    @Test func aValidCommandLineReachesTheAdapterAndFailsWithOneLine() async throws {
        // hci65534 passes every check; opening it fails (no Bluetooth in this kernel: 10; elsewhere no such adapter:
        // 11), with one line and without a usage text.
        let result = try await CLIRunner.run(
            ["simulate", "--adapter", "hci65534", "--device", "bracelet"], environment: Self.firmware, timeout: 30)
        #expect([10, 11].contains(result.status), "\(result.status): \(result.stderr)")
        #expect(result.errorLines.count == 1, "\(result.stderr)")
        #expect(!result.stderr.contains("Usage:"))
    }
}
