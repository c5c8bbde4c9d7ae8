import Batch
import Bench
import DFUCore
import DFUPackage
import DFUSimulator
import Testing

@testable import BledfuCLI

/// `bledfu bench`'s errors end in the registry's codes, by name (`BenchError.CODE` rows), or in their cause's.
@Suite(.timeLimit(.minutes(1))) struct BenchExitCodeTests {
    @Test func everyBenchErrorHasItsRow() {
        let expected: [(BenchError.Code, String)] = [
            (.noFirmware, "usage"), (.invalidGrid, "usage"), (.scratch, "failure"), (.simulatorStart, "failure"),
            (.simulatorStopped, "failure"), (.flashStart, "failure"), (.database, "batch-database"),
            (.devicesFailed, "batch-devices-failed"),
        ]
        for (code, name) in expected {
            #expect(ExitCodeRegistry.byError["BenchError.\(code.rawValue)"] == ExitCodeRegistry.code(name), "\(code)")
            #expect(ExitCodeRegistry.code(for: BenchError(code, "x")) == ExitCodeRegistry.code(name), "\(code)")
        }
    }

    @Test func aProfileOrPackageErrorEndsInItsCause() {
        let profile = BenchError(.profile, "x", cause: SimulatorError(.unknownProfile, "no toaster"))
        #expect(ExitCodeRegistry.code(for: profile) == ExitCodeRegistry.code("usage"))
        let package = BenchError(
            .package, "x", cause: DFUError(.invalidPackage, "x", cause: PackageError(.invalidArchive, "not a zip")))
        #expect(ExitCodeRegistry.code(for: package) == ExitCodeRegistry.code("invalid-archive"))
        let failed = CLIError(BenchError(.devicesFailed, "1 of 2 device(s) failed: link lost"))
        #expect(failed.exitCode == BatchExit.devicesFailed)
        #expect(failed.message == "1 of 2 device(s) failed: link lost")
    }
}
