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

    @Test func badAddressIsAUsageError() async throws {
        let result = try await CLIRunner.run(["gatt", "list", "--adapter", "virtual:/tmp/none", "--device", "C0:FF:EE"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("bad device address 'C0:FF:EE'"))
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
