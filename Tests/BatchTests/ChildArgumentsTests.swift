import BLECore
import Foundation
import Testing

@testable import Batch

/// The `bledfu flash` command line each device's child gets from the line's plan (`ProcessFlasher.arguments`).
@Suite(.timeLimit(.minutes(1))) struct ChildArgumentsTests {
    static func arguments(stallTimeout: Double?) throws -> [String] {
        let flasher = ProcessFlasher(
            executable: URL(fileURLWithPath: "/usr/bin/bledfu"), stateDirectory: URL(fileURLWithPath: "/tmp/state"),
            logDirectory: URL(fileURLWithPath: "/tmp/logs")
        ) { name in throw AdapterError(.noAdapter, "no adapter \(name)") }
        var options = BatchPlan.FlashOptions()
        options.stallTimeout = stallTimeout
        let target = BatchTarget(peer: PeerAddress(try #require(BluetoothAddress("C6:05:04:03:02:01")), type: .random), className: "bracelet")
        let job = FlashJob(
            target: target, package: PackageInfo(path: "/tmp/app.zip", sha256: "00", targetVersion: 2, totalBytes: 100),
            adapter: BatchPlan.Adapter(name: "hci0", connections: 1), attempt: 1, bootloaderName: "Dfu030201", options: options)
        return flasher.arguments(job)
    }

    static func value(_ flag: String, in arguments: [String]) -> String? {
        arguments.firstIndex(of: flag).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
    }

    /// The child's watchdog fires 30 s before the line's: a stalled child ends itself (exit 49, its link closed)
    /// before the line kills it (exit 59). With both defaults (120 s) the line used to kill first.
    @Test func theChildsWatchdogFiresBeforeTheLines() throws {
        let defaults = BatchPlan.FlashOptions()
        #expect(defaults.effectiveStallTimeout == 120)
        #expect(Self.value("--stall-timeout", in: try Self.arguments(stallTimeout: nil)) == "90")
        #expect(Self.value("--stall-timeout", in: try Self.arguments(stallTimeout: 600)) == "570")
        // The flag's minimum is 30: a line limit of 45 gives 30 (the child ends at 35 with its 5 s grace).
        #expect(Self.value("--stall-timeout", in: try Self.arguments(stallTimeout: 45)) == "30")
        #expect(Self.value("--stall-timeout", in: try Self.arguments(stallTimeout: 5)) == "30")
    }

    /// The rest of the command line: the plan's flash options as `bledfu flash` flags.
    @Test func thePlansOptionsBecomeFlags() throws {
        let arguments = try Self.arguments(stallTimeout: nil)
        #expect(Array(arguments.prefix(4)) == ["flash", "/tmp/app.zip", "--device", "C6:05:04:03:02:01"])
        #expect(Self.value("--adapter", in: arguments) == "hci0")
        #expect(Self.value("--state-dir", in: arguments) == "/tmp/state")
        #expect(Self.value("--mode", in: arguments) == "adaptive")
        #expect(Self.value("--bootloader-name", in: arguments) == "Dfu030201")
        #expect(arguments.contains("--json"))
    }

    /// The default line limit: three scans and connects plus a minute, never below two minutes.
    @Test func theLinesDefaultLimit() {
        var options = BatchPlan.FlashOptions()
        #expect(options.defaultStallTimeout == 120)
        options.scanTimeout = 30
        options.timeout = 20
        #expect(options.defaultStallTimeout == 210)
        options.stallTimeout = 300
        #expect(options.effectiveStallTimeout == 300)
    }
}
