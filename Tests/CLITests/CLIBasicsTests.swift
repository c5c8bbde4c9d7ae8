import Foundation
import Testing

@Suite(.timeLimit(.minutes(5))) struct CLIBasicsTests {
    @Test func helpListsSubcommandsAndExitCodes() async throws {
        let result = try await CLIRunner.run(["--help"])
        #expect(result.status == 0)
        for word in ["scan", "gatt", "Exit codes:", "10\tthis kernel has no Bluetooth support"] {
            #expect(result.stdout.contains(word), "help lacks \(word)")
        }
    }

    /// A bad address ends in its own documented code (14), before the adapter is looked at.
    @Test func badAddressIsExit14() async throws {
        for arguments in [
            ["gatt", "list", "--adapter", "virtual:/tmp/none", "--device", "C0:FF:EE"],
            ["flash", "app.zip", "--adapter", "virtual:/tmp/none", "--device", "C0:FF:EE"],
            ["resume", "--device", "nonsense"],
        ] {
            let result = try await CLIRunner.run(arguments)
            #expect(result.status == 14, "\(arguments): \(result.stderr)")
            #expect(result.errorLines.count == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("bledfu: error: bad device address '"), "\(arguments): \(result.stderr)")
        }
    }

    /// ArgumentParser's usage errors get bledfu's one prefix and point at the help.
    @Test func usageErrorsHaveOnePrefix() async throws {
        let result = try await CLIRunner.run(["flash"])
        #expect(result.status == 64)
        #expect(result.errorLines.count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("bledfu: error: give the package, or --image and --init"), "\(result.stderr)")
        #expect(result.stderr.contains("(see 'bledfu flash --help')"), "\(result.stderr)")
        #expect(!result.stderr.contains("Error:"))
        // A missing option of package create is a usage error too (64), not a package failure (39).
        let bin = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-app-\(UUID().uuidString.prefix(8)).bin")
        try Data(repeating: 0xA5, count: 64).write(to: bin)
        defer { try? FileManager.default.removeItem(at: bin) }
        let create = try await CLIRunner.run(["package", "create", "--application", bin.path, bin.path + ".zip"])
        #expect(create.status == 64, "\(create.stderr)")
        #expect(create.stderr == "bledfu: error: --hw-version is required\n", "\(create.stderr)")
    }

    /// A virtual radio directory that does not exist is no adapter: exit 11 at once, not after the timeout.
    @Test func missingVirtualRadioIsNoAdapterAtOnce() async throws {
        let started = Date()
        let result = try await CLIRunner.run(
            ["gatt", "list", "--adapter", "virtual:/nonexistent/bledfu-radio", "--device", "C0:FF:EE:00:00:01", "--timeout", "300"],
            timeout: 400)
        #expect(result.status == 11, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("bledfu: error: no virtual radio at /nonexistent/bledfu-radio"), "\(result.stderr)")
        // Far under the 300 s connection timeout it used to wait out (a generous bound: the machine may be loaded).
        #expect(Date().timeIntervalSince(started) < 150)
    }

    @Test func badAdapterIsAUsageError() async throws {
        let result = try await CLIRunner.run(["scan", "--adapter", "usb0"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--adapter must be hciN, 'any', or virtual:DIR"))
    }

    @Test(.enabled(if: CLIRunner.kernelHasNoBluetooth, "this kernel has Bluetooth"))
    func noBluetoothInKernelIsOneLineAndExitCode10() async throws {
        for arguments in [
            ["gatt", "list", "--adapter", "hci0", "--device", "C0:FF:EE:00:00:01"],
            ["scan", "--adapter", "hci0", "--duration", "1"], ["adapters"],
        ] {
            let result = try await CLIRunner.run(arguments)
            #expect(result.status == 10, "\(arguments): \(result.stderr)")
            #expect(result.errorLines.count == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("bledfu: error: "))
            #expect(result.stderr.lowercased().contains("no bluetooth"))
        }
    }

    @Test func unknownVirtualDeviceIsNotFound() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-empty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try await CLIRunner.run(["gatt", "list", "--adapter", "virtual:\(dir.path)", "--device", "C0:FF:EE:00:00:01"])
        #expect(result.status == 17, "\(result.stderr)")
        #expect(result.errorLines.count == 1)
    }
}
