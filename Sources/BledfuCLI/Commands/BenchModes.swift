import ArgumentParser
import Bench
import Foundation
import LegacyDFU
import MCUbootImage
import MCUmgr
import SecureDFU

/// `bledfu bench` (default subcommand `modes`): every write mode on every link profile and image size, several
/// times each, against in-process virtual devices (or a real device with `--device`).
struct BenchModes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "modes",
        abstract: "Compare write modes on virtual devices (or a real one) against the link model's ceiling.",
        discussion: """
            Each cell (mode x profile x size) runs --repeat times on a fresh virtual device over a real SEQPACKET \
            socket pair; the device paces every PDU with its link model in real time divided by --speedup. \
            --unthrottled removes the link model (infinite speedup) to measure the host cost. The table shows \
            the median, min and max kB/s (1 kB = 1000 bytes) over the whole part, the model's ceiling \
            min(air, flash) and the share of it reached, the share of the protocol bound (the ceiling less the \
            Create and Execute round trips of every object), bytes resent, checkpoint answers, failed \
            checkpoints, completed runs and correct images. --out DIR writes results.csv and results.json.

            SMP profiles (smp-sensor, smp-bracelet) run the SMP modes (default adaptive, nordic, one-at-a-time, \
            mcumgr-cli): the upload only, against the SMP bound of the same model (pipelined requests of buf_size \
            bytes); a mode list may mix families' modes, each profile runs those of its family.
            """
    )

    /// Secure DFU modes; on a Legacy profile (`"family": "legacy"`) the Legacy ones among them run (adaptive, ios,
    /// android, nrfutil), docs/legacy-dfu.md.
    static let defaultModes = SecureBench.defaultModes.joined(separator: ",")

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Comma-separated write modes (default: \(BenchModes.defaultModes); on SMP profiles \(SMPBench.defaultModes.joined(separator: ","))).",
            valueName: "modes"))
    var modes: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Comma-separated device profiles (Firmware/NAME.json or a path).", valueName: "profiles"))
    var profiles = "bracelet,sensor,fast"

    @Option(name: .long, help: ArgumentHelp("Comma-separated image sizes (bytes, or with k / m).", valueName: "sizes"))
    var sizes = "64k"

    @Option(name: .long, help: ArgumentHelp("Runs per cell.", valueName: "n"))
    var `repeat` = 3

    @Option(name: .long, help: ArgumentHelp("Divides every modelled duration (1 = real time).", valueName: "factor"))
    var speedup: Double = 1

    @Flag(name: .long, help: "No link model at all (infinite speedup): measures engine plus device cost on this host.")
    var unthrottled = false

    @Flag(
        name: .long,
        help: "Warm start: each adaptive Secure DFU run starts from what a first, untimed run to the same profile learned.")
    var warm = false

    @Option(name: .long, help: ArgumentHelp("Cells run at the same time.", valueName: "n"))
    var parallel = 1

    @Option(name: .long, help: ArgumentHelp("Seconds to wait for a checkpoint answer.", valueName: "seconds"))
    var checkpointTimeout: Double = 10

    @Option(name: .long, help: ArgumentHelp("Write results.csv and results.json here.", valueName: "dir"))
    var out: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Benchmark a device instead (runs `bledfu flash` per mode; needs --package).", valueName: "address"))
    var device: String?

    @Option(name: .long, help: ArgumentHelp("The package to flash with --device.", valueName: "zip"))
    var package: String?

    @Option(name: .long, help: ArgumentHelp("The radio for --device (hciN, any, virtual:DIR).", valueName: "adapter"))
    var adapter = "any"

    @Flag(name: .long, help: "Print one NDJSON line per run on standard output instead of the table.")
    var json = false

    func validate() throws {
        guard (1...100).contains(self.repeat) else { throw ValidationError("--repeat must be 1 to 100") }
        guard speedup > 0 else { throw ValidationError("--speedup must be positive") }
        guard (1...32).contains(parallel) else { throw ValidationError("--parallel must be 1 to 32") }
        guard checkpointTimeout > 0 else { throw ValidationError("--checkpoint-timeout must be positive") }
        for mode in modeList {
            // A mode is Secure DFU's (PacingPolicies), Legacy DFU's (LegacyPacingPolicies: adaptive, prn:N, stream,
            // ios, android, nrfutil) or SMP's (SMPPacing); each profile runs the modes of its family.
            guard (try? PacingPolicies.parse(mode)) != nil || (try? LegacyPacingPolicies.parse(mode)) != nil
                || Self.isSMPMode(mode)
            else {
                throw ValidationError("--modes: unknown mode '\(mode)' (SMP modes: \(SMPPacing.modes))")
            }
        }
        _ = try sizeList()
        if device != nil, package == nil { throw ValidationError("--device needs --package") }
    }

    var modeList: [String] {
        (modes ?? Self.defaultModes).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    static func isSMPMode(_ mode: String) -> Bool { SMPBench.isMode(mode) }

    /// The modes of `--modes` that an SMP profile runs.
    var smpModeList: [String] { SMPBench.modes(modes == nil ? nil : modeList) }

    /// The modes for `--device`: those of the package's family (an MCUboot image or NCS zip runs the SMP modes).
    func deviceModes(_ package: String) -> [String] {
        let bytes = FileManager.default.contents(atPath: package).map(Array.init) ?? []
        return MCUbootPackage.looksLikeMCUboot(bytes) ? smpModeList : modeList
    }
    var profileList: [String] { profiles.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }

    func sizeList() throws -> [Int] {
        try sizes.split(separator: ",").map { text in
            guard let size = Self.parseSize(String(text)), size > 0, size <= 64 << 20 else {
                throw ValidationError("--sizes: bad size '\(text)' (bytes, 64k, 1m; at most 64m)")
            }
            return size
        }
    }

    static func parseSize(_ text: String) -> Int? {
        let lower = text.lowercased().trimmingCharacters(in: .whitespaces)
        if lower.hasSuffix("k") { return Int(lower.dropLast()).map { $0 * 1024 } }
        if lower.hasSuffix("m") { return Int(lower.dropLast()).map { $0 * 1024 * 1024 } }
        return Int(lower)
    }

    func run() async throws {
        let started = ISO8601DateFormatter().string(from: Date())
        let runs: [BenchRun]
        if let device, let package {
            runs = try await runDevice(address: device, package: package)
        } else {
            runs = try await runVirtual()
        }
        let cells = BenchCellSummary.summarise(runs)
        if !json { print(BenchOutput.table(cells)) }
        let report = BenchReport(
            speedup: unthrottled ? .infinity : speedup, repetitions: self.repeat, startedAt: started, runs: runs,
            cells: cells)
        if let out {
            var encodable = report
            if unthrottled { encodable.speedup = 0 }  // JSON has no infinity: 0 means "no link model".
            try BenchOutput.write(encodable, to: out)
        }
        if runs.contains(where: { !$0.completed || !$0.imageCorrect }) {
            Console.warning("some runs failed or left a wrong image (see the table)")
        }
    }

    /// The matrix on in-process virtual devices (the `Bench` module's loop), `--parallel` cells at a time.
    func runVirtual() async throws -> [BenchRun] {
        let effectiveSpeedup = unthrottled ? Double.infinity : speedup
        let targets = try BenchMatrix.targets(
            profiles: profileList, sizes: try sizeList(), speedup: effectiveSpeedup, catalog: SimulatorProfiles.catalog)
        let jobs = BenchMatrix.jobs(
            targets: targets, modes: modes == nil ? nil : modeList, repetitions: self.repeat, warm: warm)
        let trace: (@Sendable (String) -> Void)? =
            ProcessInfo.processInfo.environment["BLEDFU_BENCH_TRACE"] == "1" ? { @Sendable line in Console.errorRaw(line) } : nil
        return await BenchMatrix.run(
            jobs, parallel: parallel, timeout: .milliseconds(Int64(checkpointTimeout * 1000)), trace: trace
        ) { emit($0) }
    }

    /// Progress: one line per finished run on standard error, or one NDJSON line with --json.
    func emit(_ run: BenchRun) {
        if json {
            Console.jsonLine(run)
            return
        }
        let ratio = run.ceilingBytesPerSecond > 0 ? " (\(BenchOutput.percent(run.bytesPerSecond / run.ceilingBytesPerSecond)))" : ""
        let status = run.completed ? (run.imageCorrect ? "ok" : "WRONG IMAGE") : "failed: \(run.error ?? "?")"
        Console.errorRaw(
            "bench: \(run.mode) \(run.profile) \(BenchOutput.size(run.imageBytes)) #\(run.repetition): "
                + "\(BenchOutput.kB(run.bytesPerSecond)) kB/s\(ratio), \(run.bytesResent) bytes resent, "
                + "\(run.failedCheckpoints) failed checkpoints, \(status)")
    }
}
