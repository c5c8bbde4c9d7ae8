import DFUSimulator
import Foundation
import Testing

/// `bledfu smp echo|params` against `bledfu simulate --device smp-sensor` (buf_size 2475, buf_count 4, MCUboot
/// answering bootloader information), and against a device built without `mcumgr_params` (ENOTSUP: exit 40).
@Suite(.timeLimit(.minutes(10))) struct SMPOSCommandTests {
    func run(_ simulator: SimulatorProcess, _ arguments: [String]) async throws -> CLIRunner.Result {
        try await CLIRunner.run(arguments + ["--adapter", "virtual:\(simulator.radio.path)"], timeout: 120)
    }

    @Test func echoAndParams() async throws {
        let simulator = try await SMPCLITests.start(["--speedup", "50"])
        defer { simulator.cleanUp() }
        let echo = try await run(simulator, ["smp", "echo", "hello, zephyr", "--device", SMPCLITests.device])
        #expect(echo.status == 0, "\(echo.stderr)")
        #expect(echo.lines.first?.hasPrefix("hello, zephyr  (") == true, "\(echo.stdout)")
        let json = CLIRunner.events(try await run(simulator, ["smp", "echo", "ping", "--device", SMPCLITests.device, "--json"]))
        #expect(json.first?["text"] as? String == "ping" && json.first?["milliseconds"] is Double, "\(json)")

        let params = try await run(simulator, ["smp", "params", "--device", SMPCLITests.device])
        #expect(params.status == 0, "\(params.stderr)")
        #expect(params.lines.first == "buf_size 2475  buf_count 4  (uploads: requests of at most 2475 bytes, 3 in flight)", "\(params.stdout)")
        #expect(params.lines.dropFirst().first?.hasPrefix("bootloader MCUboot  mode ") == true, "\(params.stdout)")
        let object = CLIRunner.events(try await run(simulator, ["smp", "params", "--device", SMPCLITests.device, "--json"])).first
        #expect(object?["buf_size"] as? Int == 2475 && object?["buf_count"] as? Int == 4 && object?["window"] as? Int == 3, "\(String(describing: object))")
        #expect(object?["bootloader"] as? String == "MCUboot")

        let tooLong = try await CLIRunner.run(["smp", "echo", String(repeating: "x", count: 257), "--device", SMPCLITests.device])
        #expect(tooLong.status == 64, "\(tooLong.stderr)")
    }

    /// `smp` and `image` commands on a device without the SMP service (a Secure DFU bracelet): one line, exit 45
    /// (`no-update-service`), as `flash` ends there.
    @Test func aDeviceWithoutSMPIsExit45() async throws {
        let simulator = try SimulatorProcess(["--device", "bracelet", "--speedup", "50"])
        defer { simulator.cleanUp() }
        #expect(await simulator.waitUntil(timeout: 60) { !simulator.files(".adv").isEmpty }, "\(simulator.stderr)")
        for command in [["smp", "params"], ["image", "list"]] {
            let result = try await run(simulator, command + ["--device", "C6:05:04:03:02:01"])
            #expect(result.status == 45, "\(command): \(result.stderr)")
            #expect(result.errorLines.count == 1, "\(command): \(result.stderr)")
        }
    }

    /// A device without `CONFIG_MCUMGR_GRP_OS_MCUMGR_PARAMS` answers ENOTSUP: one line naming it, exit 40.
    @Test func paramsRefusedByADeviceWithoutThem() async throws {
        let path = try SMPCLIRefusalTests.profile { $0.smp.mcumgrParameters = false }
        defer { try? FileManager.default.removeItem(at: path.deletingLastPathComponent()) }
        let simulator = try await SMPCLIRefusalTests.start(path)
        defer { simulator.cleanUp() }
        let params = try await run(simulator, ["smp", "params", "--device", SMPCLITests.device])
        #expect(params.status == 40, "\(params.stderr)")
        #expect(params.errorLines.count == 1 && params.errorLines.first?.contains("MGMT_ERR_ENOTSUP (8)") == true, "\(params.stderr)")
    }
}
