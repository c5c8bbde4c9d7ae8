import DFUSimulator
import Foundation
import LinuxIO
import MCUbootImage
import MCUmgr
import Testing

/// The SMP family through the command line, against `bledfu simulate --device smp-sensor` on a virtual radio: scan
/// shows the family, `image list|test|reset|confirm`, `flash` of the signed sample with `--key` and `--confirm`,
/// per-family `--mode` checks, and a flash killed with SIGKILL then run again, resuming from the device's offset.
@Suite(.timeLimit(.minutes(10))) struct SMPCLITests {
    static let device = "E4:5A:3C:2B:1A:09"
    static var sample: String { CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/smp-sensor-app-v2.bin").path }
    static var mcubootKey: String {
        CLIRunner.repositoryRoot.appendingPathComponent("Firmware/keys/mcuboot-test-key-DO-NOT-USE.pub.pem").path
    }

    static func sampleHash() throws -> [UInt8] {
        try #require(try MCUbootImage(bytes: Array(Data(contentsOf: URL(fileURLWithPath: sample)))).hashTLV)
    }

    /// The device's status file as the simulator writes it.
    static func status(_ simulator: SimulatorProcess) -> SMPDeviceState? {
        let path = simulator.radio.appendingPathComponent("status/E4-5A-3C-2B-1A-09.json")
        guard let data = FileManager.default.contents(atPath: path.path) else { return nil }
        return try? JSONDecoder().decode(SMPDeviceState.self, from: data)
    }

    static func start(_ arguments: [String] = []) async throws -> SimulatorProcess {
        let simulator = try SimulatorProcess(["--device", "smp-sensor"] + arguments)
        guard await simulator.waitUntil(timeout: 60, { !simulator.files(".adv").isEmpty }) else {
            simulator.cleanUp()
            throw FlashFixture.Failure("the SMP device does not advertise: \(simulator.stderr)")
        }
        return simulator
    }

    func run(_ simulator: SimulatorProcess, _ arguments: [String], timeout: TimeInterval = 120) async throws -> CLIRunner.Result {
        try await CLIRunner.run(arguments + ["--adapter", "virtual:\(simulator.radio.path)"], timeout: timeout)
    }

    @Test func scanShowsTheFamilyAndImageListTheSlots() async throws {
        let simulator = try await Self.start(["--speedup", "50"])
        defer { simulator.cleanUp() }
        let scan = try await run(simulator, ["scan", "--duration", "1"])
        #expect(scan.status == 0, "\(scan.stderr)")
        // "ADDRESS TYPE RSSI FAMILY NAME SERVICES"
        #expect(
            scan.lines.contains { $0.hasPrefix(Self.device) && $0.split(separator: " ").dropFirst(4).first == "smp" },
            "\(scan.stdout)")
        let json = try await run(simulator, ["scan", "--duration", "1", "--json"])
        #expect(CLIRunner.events(json).contains { $0["family"] as? String == "smp" }, "\(json.stdout)")

        let list = try await run(simulator, ["image", "list", "--device", Self.device])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.lines.first == "image 0 slot 0: 1.0.0  active confirmed bootable", "\(list.stdout)")
        let slots = CLIRunner.events(try await run(simulator, ["image", "list", "--device", Self.device, "--json"]))
        #expect(slots.count == 1)
        #expect(slots.first?["active"] as? Bool == true)
        #expect((slots.first?["hash"] as? String)?.count == 64)

        let status = try await run(simulator, ["simulate", "status"])
        #expect(status.stdout.contains("SMP Sensor smp at \(Self.device)"), "\(status.stdout)")
    }

    @Test func flashWithTheKeyEndsConfirmedAndARerunIsANoOp() async throws {
        let simulator = try await Self.start(["--speedup", "50"])
        defer { simulator.cleanUp() }
        let state = simulator.radio.appendingPathComponent("state").path
        let capture = simulator.radio.appendingPathComponent("smp.btsnoop").path
        let flash = try await run(
            simulator,
            ["flash", Self.sample, "--device", Self.device, "--key", Self.mcubootKey, "--state-dir", state, "--capture", capture])
        #expect(flash.status == 0, "\(flash.stderr)")
        try await Self.expectCaptureDecodes(capture)
        // The family's summary line (standard output, with the progress).
        #expect(flash.stdout.contains("2.0.0, active, confirmed"), "\(flash.stdout)")
        let hash = try Self.sampleHash()
        // The status file is written when the link ends, just after the flash exits.
        await simulator.waitUntil(timeout: 60) { Self.status(simulator)?.images.first { $0.active }?.hash == hash }
        let active = Self.status(simulator)?.images.first { $0.active }
        #expect(active?.hash == hash)
        #expect(active?.confirmed == true)

        let again = try await run(simulator, ["flash", Self.sample, "--device", Self.device, "--state-dir", state])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(Self.status(simulator)?.counters.swaps == 1, "a rerun installs nothing again")
    }

    /// tshark reads the capture as ATT (Write Commands and notifications), and with tools/wireshark/mcumgr.lua as
    /// MCUmgr SMP: the parameters and state reads, the upload's writes, each answered with its sequence number.
    static func expectCaptureDecodes(_ capture: String) async throws {
        let tshark = "/usr/bin/tshark"
        guard FileManager.default.isExecutableFile(atPath: tshark) else {
            if ProcessInfo.processInfo.environment["CI"] == "true" { Issue.record("tshark is missing in CI (tools/setup installs it)") }
            return
        }
        let script = CLIRunner.repositoryRoot.appendingPathComponent("tools/wireshark/mcumgr.lua").path
        let result = try await CLIRunner.run(
            ["-X", "lua_script:\(script)", "-r", capture, "-Y", "mcumgr.op", "-T", "fields", "-e", "btatt.opcode",
             "-e", "mcumgr.op", "-e", "mcumgr.group", "-e", "mcumgr.id", "-e", "mcumgr.seq"],
            environment: ["HOME": NSTemporaryDirectory()], timeout: 120, executable: URL(fileURLWithPath: tshark))
        #expect(result.status == 0, "\(result.stderr)")
        let rows = result.lines.map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        #expect(rows.allSatisfy { $0.count == 5 }, "\(result.stdout)")
        // os/6 mcumgr_params read, image/0 state read, image/1 upload writes (op 2) and their answers (op 3).
        #expect(rows.contains { $0[0] == "0x52" && $0[1] == "0" && $0[2] == "0" && $0[3] == "6" }, "\(result.stdout)")
        #expect(rows.contains { $0[0] == "0x52" && $0[1] == "0" && $0[2] == "1" && $0[3] == "0" })
        let uploads = rows.filter { $0[0] == "0x52" && $0[1] == "2" && $0[2] == "1" && $0[3] == "1" }
        let answers = rows.filter { $0[0] == "0x1b" && $0[1] == "3" && $0[2] == "1" && $0[3] == "1" }
        #expect(uploads.count >= 20, "\(uploads.count) upload requests decoded")
        #expect(Set(uploads.map { $0[4] }).isSubset(of: Set(answers.map { $0[4] })), "every upload request is answered")
    }

    @Test func uploadOnlyThenImageTestResetAndConfirm() async throws {
        let simulator = try await Self.start(["--speedup", "50"])
        defer { simulator.cleanUp() }
        let flash = try await run(
            simulator,
            ["flash", Self.sample, "--device", Self.device, "--confirm", "upload-only", "--state-dir",
             simulator.radio.appendingPathComponent("state").path])
        #expect(flash.status == 0, "\(flash.stderr)")
        let hash = try Self.sampleHash()
        let hex = hash.map { String(format: "%02x", $0) }.joined()
        let listed = try await run(simulator, ["image", "list", "--device", Self.device])
        #expect(listed.stdout.contains("image 0 slot 1: 2.0.0  bootable\n  hash \(hex)"), "\(listed.stdout)")

        let test = try await run(simulator, ["image", "test", hex, "--device", Self.device])
        #expect(test.status == 0, "\(test.stderr)")
        #expect(test.stdout.contains("image 0 slot 1: 2.0.0  pending bootable"), "\(test.stdout)")
        let reset = try await run(simulator, ["image", "reset", "--device", Self.device])
        #expect(reset.status == 0, "\(reset.stderr)")
        // The device swaps and boots (modelled time / 50), then answers again: the new image runs, unconfirmed.
        var after: CLIRunner.Result?
        for _ in 0..<30 {
            let list = try await run(simulator, ["image", "list", "--device", Self.device, "--timeout", "5"])
            if list.status == 0 {
                after = list
                break
            }
        }
        #expect(after?.lines.first == "image 0 slot 0: 2.0.0  active bootable", "\(after?.stdout ?? "")")
        let confirm = try await run(simulator, ["image", "confirm", "--device", Self.device])
        #expect(confirm.status == 0, "\(confirm.stderr)")
        #expect(confirm.lines.first == "image 0 slot 0: 2.0.0  active confirmed bootable", "\(confirm.stdout)")
    }

    @Test func modesAndSettingsAreCheckedByThePackagesFamilyBeforeConnecting() async throws {
        // No device at all: every refusal comes from the plan, before anything connects.
        let radio = try FlashFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: radio) }
        func flash(_ package: String, _ extra: [String]) async throws -> CLIRunner.Result {
            try await CLIRunner.run(
                ["flash", package, "--device", Self.device, "--adapter", "virtual:\(radio.path)", "--state-dir", radio.path] + extra,
                timeout: 120)
        }
        let prn = try await flash(Self.sample, ["--mode", "prn:12"])
        #expect(prn.status == 64, "\(prn.stderr)")
        #expect(prn.stderr.contains("--mode prn:12 is not an SMP mode"), "\(prn.stderr)")
        let confirm = try await flash(Self.sample, ["--confirm", "later"])
        #expect(confirm.status == 64, "\(confirm.stderr)")
        #expect(confirm.stderr.contains("smp.confirm=later"), "\(confirm.stderr)")
        let secure = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/sensor-app-v2.zip").path
        let window = try await flash(secure, ["--mode", "window:4"])
        #expect(window.status == 64, "\(window.stderr)")
        #expect(window.stderr.contains("--mode window:4 is not a Secure DFU mode"), "\(window.stderr)")
        // The Secure DFU signing key is not MCUboot's: the signature check refuses the image.
        let wrongKey = try await flash(Self.sample, ["--key", FlashFixture.publicKey.path])
        #expect((30...39).contains(wrongKey.status), "\(wrongKey.stderr)")
        #expect(wrongKey.errorLines.count == 1, "\(wrongKey.stderr)")
        #expect(wrongKey.stderr.contains("signature") || wrongKey.stderr.contains("key"), "\(wrongKey.stderr)")
    }

    @Test func aKilledFlashIsResumedByTheRerunFromTheDevicesOffset() async throws {
        // Slowed down (speedup 0.5) so the kill lands in the middle of the upload.
        let simulator = try await Self.start(["--speedup", "0.5"])
        defer { simulator.cleanUp() }
        let state = simulator.radio.appendingPathComponent("state")
        let events = simulator.radio.appendingPathComponent("flash.out")
        let flash = try SpawnedProcess(
            CLIRunner.binary,
            [
                "flash", Self.sample, "--device", Self.device, "--adapter", "virtual:\(simulator.radio.path)", "--state-dir",
                state.path, "--json",
            ], stdout: events)
        defer { if flash.isRunning { flash.terminate() } }
        func confirmed() -> Int {
            let text = (try? String(contentsOf: events, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { line -> Int? in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["event"] as? String == "progress"
                else { return nil }
                return object["bytes"] as? Int
            }.max() ?? 0
        }
        let deadline = Date().addingTimeInterval(120)
        while confirmed() < 16_000, flash.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let killedWhileRunning = flash.isRunning
        flash.child.signal(SIGKILL)
        await flash.waitForExit()
        #expect(killedWhileRunning, "the flash ended before the kill point")
        #expect(flash.terminationStatus == 128 + SIGKILL)
        let held = confirmed()

        let rerun = try await CLIRunner.run(
            ["flash", Self.sample, "--device", Self.device, "--adapter", "virtual:\(simulator.radio.path)", "--state-dir",
             state.path, "--json"], timeout: 300)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let first = CLIRunner.events(rerun).first { $0["event"] as? String == "progress" }?["bytes"] as? Int ?? 0
        #expect(first >= held, "the rerun resumed at the device's offset (\(first) after \(held) confirmed)")
        let hash = try Self.sampleHash()
        await simulator.waitUntil(timeout: 60) { Self.status(simulator)?.images.first { $0.active }?.confirmed == true }
        let device = try #require(Self.status(simulator))
        let active = device.images.first { $0.active }
        #expect(active?.hash == hash)
        #expect(active?.confirmed == true)
        // At most one window (buf_count − 1 = 3 chunks of less than 2475 bytes) and the resume's 32-byte first chunk were
        // sent twice.
        let size = try #require(FileManager.default.contents(atPath: Self.sample)).count
        #expect(device.counters.uploadBytesReceived <= size + 3 * 2475 + 32, "\(device.counters)")
    }
}
