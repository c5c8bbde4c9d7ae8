import Batch
import Foundation
import Testing

@testable import BledfuCLI

/// One test per documented exit code (issue 19 point 6): for every entry of ``ExitCodeRegistry`` a row says how
/// the code is proven. Most rows run the built binary into the code here and check its one `bledfu: error:` line;
/// a code this machine cannot produce (a kernel's adapter states) or one whose scenario is a long run of its own
/// names the test that runs the binary into it, and that test's source must still check the code. A new registry
/// entry without a row fails ``everyRegistryCodeHasARow``.
@Suite(.timeLimit(.minutes(10))) struct ExitCodeTableTests {
    /// How a code is proven.
    enum Proof: Sendable {
        /// Run the binary with these arguments (made in a scratch directory) and expect the code, one error line
        /// containing `says` (nil: no error line; success).
        case run(@Sendable (Scratch) async throws -> [String], says: String?)
        /// The test `test` in Tests/CLITests/`file` runs the binary into this code; its source must contain `check`.
        case elsewhere(file: String, test: String, check: String)
        /// Not run into here: `why` (a real kernel's adapter state, a controller's limits, a scenario that is a long
        /// run of its own); the registry maps the error (`Type.code`) or the name to it, checked in-process: the
        /// nearest honest check.
        case mapped(why: String, error: String)
    }

    /// A scratch directory with the helpers the rows need.
    struct Scratch: Sendable {
        let directory: URL

        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

        /// Writes a zip with python3's zipfile (`entries`: name → bytes), for the package codes; `corruptFirst`
        /// flips a byte of the first entry's stored data (CRC mismatch).
        func zip(_ name: String, _ entries: [(String, [UInt8])], deflate: Bool = false, corruptFirst: Bool = false) async throws
            -> String
        {
            let out = path(name)
            var script = "import zipfile,sys\n"
            script += "z=zipfile.ZipFile(sys.argv[1],'w',zipfile.\(deflate ? "ZIP_DEFLATED" : "ZIP_STORED"))\n"
            for (index, entry) in entries.enumerated() {
                let file = path("entry\(index)")
                try Data(entry.1).write(to: URL(fileURLWithPath: file))
                script += "z.writestr(\(pythonString(entry.0)),open(\(pythonString(file)),'rb').read())\n"
            }
            script += "z.close()\n"
            if corruptFirst {
                // The first local header is 30 bytes plus the name; flip the first data byte.
                let first = entries.first?.0.utf8.count ?? 0
                script += "b=bytearray(open(sys.argv[1],'rb').read()); b[30+\(first)]^=0xFF; open(sys.argv[1],'wb').write(b)\n"
            }
            _ = try await CLIRunner.runTool("/usr/bin/env", ["python3", "-c", script, out])
            return out
        }

        /// The entries of a sample package (Firmware/samples).
        func sampleEntries(_ name: String) async throws -> [(String, [UInt8])] {
            let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/\(name)").path
            let listing = try await CLIRunner.runTool("/usr/bin/env", ["python3", "-c", """
                import zipfile,sys
                z=zipfile.ZipFile(sys.argv[1])
                print("\\n".join(z.namelist()))
                for n in z.namelist(): open(sys.argv[2]+"/"+n.replace("/","_"),"wb").write(z.read(n))
                """, sample, directory.path])
            return try listing.split(separator: "\n").map { name in
                let file = directory.appendingPathComponent(name.replacingOccurrences(of: "/", with: "_"))
                return (String(name), Array(try Data(contentsOf: file)))
            }
        }

        /// A plan for the radio `radio/` of this directory: one bracelet class, discovery for `seconds`, no retry,
        /// the line stopping after one failure.
        func plan(discover seconds: Int) throws -> String {
            try FileManager.default.createDirectory(atPath: path("radio"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: path("state"), withIntermediateDirectories: true)
            let sample = CLIRunner.repositoryRoot.appendingPathComponent("Firmware/samples/bracelet-app-v2.zip").path
            let text = """
                adapters:
                  - name: virtual:\(path("radio"))
                    connections: 1
                classes:
                  bracelet:
                    package: \(sample)
                discover:
                  duration: \(seconds)
                  expect: 1
                  rules:
                    - class: bracelet
                      name_prefix: Bracelet
                policies:
                  retries: 0
                  stop_after_failures: 1

                """
            try Data(text.utf8).write(to: URL(fileURLWithPath: path("plan.yaml")))
            return path("plan.yaml")
        }

        /// Starts tools/example-virtual-device.py (no DFU service) on `radio/`, advertising `name`; the test stops
        /// it after the run (its pid is in `pids`).
        func device(name: String) async throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", CLIRunner.repositoryRoot.appendingPathComponent("tools/example-virtual-device.py").path,
                "--radio", path("radio"), "--address", "C0:FF:EE:00:00:51", "--name", name,
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            try Data("\(process.processIdentifier)\n".utf8).write(to: URL(fileURLWithPath: path("pids")))
            let adv = path("radio/C0-FF-EE-00-00-51.adv")
            await OffPool.poll(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: adv) }
        }

        /// Stops what ``device(name:)`` started.
        func stopDevices() {
            let text = (try? String(contentsOf: URL(fileURLWithPath: path("pids")), encoding: .utf8)) ?? ""
            for pid in text.split(separator: "\n").compactMap({ Int32($0) }) { kill(pid, SIGTERM) }
        }

        private func pythonString(_ text: String) -> String {
            "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        }
    }

    static let noRadio = "virtual:/nonexistent/bledfu-no-radio"
    static let device = "C0:FF:EE:00:00:01"

    /// Package rows: inspect a crafted archive.
    static func inspect(_ make: @escaping @Sendable (Scratch) async throws -> String) -> @Sendable (Scratch) async throws -> [String] {
        { scratch in ["package", "inspect", try await make(scratch)] }
    }

    static let rows: [Int32: Proof] = [
        0: .run({ _ in ["exit-codes"] }, says: nil),
        1: .run({ scratch in ["resume", "--state-dir", scratch.path("no-journals")] }, says: "no unfinished upload"),
        10: CLIRunner.kernelHasNoBluetooth
            ? .run({ _ in ["scan", "--adapter", "hci0", "--duration", "1"] }, says: "luetooth")
            : .mapped(why: "this kernel has Bluetooth: EAFNOSUPPORT cannot happen", error: "AdapterError.noBluetoothInKernel"),
        11: .run({ _ in ["gatt", "list", "--adapter", noRadio, "--device", device] }, says: "no virtual radio at"),
        12: .mapped(why: "an adapter that is down needs a kernel's hciN (tools/vm-test)", error: "AdapterError.adapterDown"),
        13: .mapped(why: "CAP_NET_RAW is a kernel's (tests run as root)", error: "AdapterError.permissionDenied"),
        14: .run({ _ in ["gatt", "list", "--adapter", noRadio, "--device", "C0:FF:EE"] }, says: "bad device address 'C0:FF:EE'"),
        15: .mapped(why: "a virtual device accepts or is absent; a kernel's connect times out (tools/vm-test)", error: "AdapterError.connectionTimeout"),
        16: .elsewhere(file: "ExitCodeDeviceTests.swift", test: "aDeviceThatGoesAwayEndsIn16", check: "status == 16"),
        17: .run({ scratch in
            try FileManager.default.createDirectory(atPath: scratch.path("radio"), withIntermediateDirectories: true)
            return ["gatt", "list", "--adapter", "virtual:\(scratch.path("radio"))", "--device", device, "--timeout", "1"]
        }, says: "no such virtual device"),
        18: .mapped(
            why: "EBUSY on a link another program holds is a kernel's; BlueZSocketTests.immediateEBUSYTellsItsTwoCausesApart injects it",
            error: "AdapterError.busy"),
        19: .mapped(why: "the virtual radio reports a device that stopped listening as not found", error: "AdapterError.connectionRefused"),
        20: .elsewhere(file: "ExitCodeDeviceTests.swift", test: "attErrorsEndIn20", check: "status == 20"),
        21: .mapped(why: "the virtual controller's refusal is TransportTests.VirtualControllerTests'", error: "AdapterError.noFreeLink"),
        22: .mapped(why: "a controller busy creating a connection is a kernel's (many-links.md)", error: "AdapterError.adapterBusy"),
        23: .elsewhere(file: "DeviceSelectionTests.swift", test: "aNameSeveralDevicesAnswerToIsAnErrorListingThem", check: "status == 23"),
        30: .run(inspect { scratch in
            try Data("not a zip at all\n".utf8).write(to: URL(fileURLWithPath: scratch.path("garbage.zip")))
            return scratch.path("garbage.zip")
        }, says: "not a zip archive"),
        31: .run(inspect { try await $0.zip("unsafe.zip", [("../evil.bin", [1, 2, 3])]) }, says: "evil.bin"),
        // Over 1 MiB at a ratio above 100:1 (2 MiB of zeros deflate to about 2 KiB).
        32: .run(inspect { try await $0.zip("bomb.zip", [("manifest.json", [UInt8](repeating: 0, count: 2 << 20))], deflate: true) }, says: "zip bomb"),
        33: .run(inspect { try await $0.zip("crc.zip", [("manifest.json", Array("{\"manifest\":{}}".utf8))], corruptFirst: true) }, says: "manifest.json"),
        34: .run(inspect { try await $0.zip("nomanifest.zip", [("app.bin", [1, 2, 3])]) }, says: "manifest"),
        35: .run(inspect { scratch in
            try await scratch.zip("missing.zip", try await scratch.sampleEntries("bracelet-app-v2.zip").filter { !$0.0.hasSuffix(".bin") })
        }, says: "bracelet-app-v2.bin"),
        // Three bytes decode neither as a Secure (protobuf) nor as a Legacy init packet (two bytes would: CRC-16 only).
        36: .run({ scratch in
            let entries = try await scratch.sampleEntries("bracelet-app-v2.zip").map { $0.0.hasSuffix(".dat") ? ($0.0, [0xFF, 0xFF, 0xFF]) : $0 }
            return ["package", "verify", try await scratch.zip("baddat.zip", entries)]
        }, says: "bracelet-app-v2.dat does not decode"),
        37: .run({ scratch in
            let entries = try await scratch.sampleEntries("bracelet-app-v2.zip").map { $0.0.hasSuffix(".bin") ? ($0.0, $0.1.map { $0 ^ 1 }) : $0 }
            return ["package", "verify", try await scratch.zip("tampered.zip", entries)]
        }, says: "does not match"),
        38: .elsewhere(file: "PackageCLITests.swift", test: "verifyWithAnotherKeyFails", check: "status == 38"),
        39: .run({ scratch in ["package", "inspect", scratch.path("absent.zip")] }, says: "no such file or directory (ENOENT)"),
        40: .elsewhere(file: "ExitCodeDeviceTests.swift", test: "aRefusalEndsIn40", check: "status == 40"),
        41: .mapped(why: "the updater giving up after repeated CRC failures is the engine suites' scenario (SecureDFUTests)", error: "DFUError.verification-failed"),
        42: .elsewhere(file: "FlashResilienceTests.swift", test: "stallingDeviceEndsWithATimeout", check: "FlashExit.timeout"),
        43: .elsewhere(file: "FlashResilienceTests.swift", test: "reconnectAttemptsZeroNeverReconnects", check: "FlashExit.linkLost"),
        44: .mapped(why: "a bootloader that never advertises after the jump needs a device that breaks its own jump", error: "DFUError.not-found"),
        45: .elsewhere(file: "ExitCodeDeviceTests.swift", test: "aDeviceWithoutDFUEndsIn45", check: "status == 45"),
        46: .elsewhere(file: "LegacyCLITests.swift", test: "securePackageOnALegacyDevice", check: "status == 46"),
        47: .elsewhere(file: "SMPCLIRefusalTests.swift", test: "aRevertedImageIsExit47", check: "status == 47"),
        48: .elsewhere(file: "NeverStrandCLITests.swift", test: "anotherHardwareVersionIsRefusedBeforeTheJump", check: "status == 48"),
        49: .elsewhere(file: "FlashResilienceTests.swift", test: "theWatchdogEndsAStalledFlashIn49", check: "FlashExit.stalled"),
        50: .elsewhere(file: "BatchCLITests.swift", test: "sixteenDevicesInOneBatch", check: "status == 50"),
        51: .elsewhere(file: "BatchCLITests.swift", test: "aBadPlanIsRejectedWithItsLine", check: "status == 51"),
        // A device without DFU fails (45) and the plan stops the line after one failure.
        52: .run({ scratch in
            let plan = try scratch.plan(discover: 3)
            try await scratch.device(name: "Bracelet-X")
            return ["batch", plan, "--state-dir", scratch.path("state"), "--db", scratch.path("line.sqlite")]
        }, says: "the line stopped after 1 failed device(s)"),
        53: .elsewhere(file: "LineCLITests.swift", test: "badLineInputGetsOneLineAndItsExitCode", check: "status == 53"),
        54: .run({ scratch in
            let plan = try scratch.plan(discover: 1)
            return ["batch", plan, "--state-dir", scratch.path("state"), "--db", scratch.path("line.sqlite")]
        }, says: "no device found"),
        55: .elsewhere(file: "BatchBenchTests.swift", test: "aMissedGoalIsExit55", check: "status == 55"),
        56: .elsewhere(file: "LineCLITests.swift", test: "badLineInputGetsOneLineAndItsExitCode", check: "status == 56"),
        57: .elsewhere(file: "LineCLITests.swift", test: "badLineInputGetsOneLineAndItsExitCode", check: "status == 57"),
        58: .elsewhere(file: "LineCLITests.swift", test: "badLineInputGetsOneLineAndItsExitCode", check: "status == 58"),
        59: .elsewhere(file: "BatchStallTests.swift", test: "aChildThatHangsIsKilledAndTheAttemptFailsWith59", check: "exitCode == 59"),
        60: .elsewhere(file: "BatchBadInputTests.swift", test: "anAdapterPulledMidBatch", check: ".exited(60)"),
        61: .mapped(
            why: "a run whose every thread is blocked needs a product fault; ProcessBackstopTests fire the backstop, BatchBackstopTests its line",
            error: "batch-stalled"),
        64: .run({ _ in ["scan", "--min-rssi"] }, says: "see 'bledfu scan --help'"),
        130: .elsewhere(file: "FlashResilienceTests.swift", test: "secondInterruptExitsAtOnce", check: "130"),
    ]

    @Test func everyRegistryCodeHasARow() {
        let codes = Set(ExitCodeRegistry.entries.map(\.code))
        #expect(Set(Self.rows.keys) == codes, "rows missing: \(codes.subtracting(Self.rows.keys).sorted())")
    }

    @Test(arguments: ExitCodeRegistry.entries.map(\.code))
    func theCodeIsProven(_ code: Int32) async throws {
        let proof = try #require(Self.rows[code])
        switch proof {
        case .run(let arguments, let says):
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bledfu-exit-\(code)-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let scratch = Scratch(directory: directory)
            defer { scratch.stopDevices() }
            let result = try await CLIRunner.run(try await arguments(scratch), timeout: 120)
            #expect(result.status == code, "\(code): exit \(result.status), \(result.stderr)")
            if let says {
                #expect(result.errorLines.count == 1, "\(code): \(result.stderr)")
                #expect(result.stderr.hasPrefix("bledfu: error: "), "\(code): \(result.stderr)")
                #expect(result.stderr.contains(says), "\(code): '\(says)' not in \(result.stderr)")
                #expect(!result.stderr.contains("Error:"), "\(code): a second prefix in \(result.stderr)")
            }
        case .elsewhere(let file, let test, let check):
            let source = try String(
                contentsOf: CLIRunner.repositoryRoot.appendingPathComponent("Tests/CLITests/\(file)"), encoding: .utf8)
            #expect(source.contains("func \(test)("), "\(code): \(file) has no test \(test)")
            #expect(source.contains(check), "\(code): \(file) no longer checks '\(check)'")
        case .mapped(_, let error):
            let mapped = ExitCodeRegistry.byError[error] ?? ExitCodeRegistry.entries.first { $0.name == error }?.code
            #expect(mapped == code, "\(code): \(error) maps to \(mapped ?? -1)")
        }
    }
}
