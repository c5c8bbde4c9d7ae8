import Batch
import DFUSimulator
import Testing

@testable import BledfuCLI

/// SimulatorHost's set-up errors reach the exit code the registry names for them (docs/exit-codes.md): a profile,
/// override, key or fault plan the command line names is a usage error (64), a missing status 17, a controller
/// profile that cannot be written 1.
@Suite(.timeLimit(.minutes(10))) struct SimulatorErrorCodeTests {
    @Test func everySimulatorErrorMapsThroughTheRegistry() {
        let expected: [(SimulatorError.Code, Int32)] = [
            (.invalidRequest, 64), (.unknownProfile, 64), (.invalidProfile, 64), (.wrongFamily, 64),
            (.invalidOverride, 64), (.invalidKey, 64), (.addressCollision, 64), (.invalidFaultPlan, 64),
            (.noStatus, 17), (.controllerUnwritable, 1), (SimulatorError.Code(rawValue: "newer"), 64),
        ]
        for (code, exit) in expected {
            #expect(ExitCodeRegistry.code(for: SimulatorError(code, "x")) == exit, "\(code)")
            let mapped = CLIError(mapping: SimulatorError(code, "the message"))
            #expect(mapped?.exitCode == exit && mapped?.message == "the message", "\(code)")
        }
        #expect(ExitCodeRegistry.code("device-not-found") == 17)
    }
}
