import BLECore
import DFUSimulator
import Foundation
import Synchronization

/// The fault campaign (tools/fault-campaign, docs/reliability.md): uploads to virtual devices with seeded random
/// faults, each run ending in a verified image or a clear error with a resumable device. Exit status 1 on any
/// violation.
///
///     FuzzFaultCampaign [--runs N] [--seed S] [--attempts N] [--timeout-ms MS] [--verbose] [--run INDEX]
///                       [--kill-share P] [--no-kills] [--bledfu PATH] [--speedup K] [--keep-files DIR] [--capture DIR]
///                       [--no-flash-faults]
///
/// A full flash queue (before a Create Data or after a checksum: SDK 15-17 refuse the Create with 0x05 and drop
/// writes until it drained) is one of the faults drawn (issue 18 point 1); `--no-flash-faults` leaves it out, which
/// gives the draws of the campaigns before it (docs/reliability.md).
/// `--run INDEX` replays one run of the campaign (the plan depends only on the seed, the index and the kill share).
/// Runs that draw a kill run the real `bledfu` (``ProcessKillRun``): `--bledfu` names it (default: next to this
/// executable); `--kill-share P` gives that many of the other runs a kill too; `--no-kills` runs every plan in this
/// process without its kills (the other faults as drawn; no `bledfu` needed).
///
/// Legacy DFU runs follow (``LegacyRunPlan``, ``LegacyProcessRun``): `--legacy-runs N` (default 4: one per profile) uploads through
/// `bledfu simulate` and `bledfu flash`/`resume` processes to each Legacy profile in turn, with seeded disconnects and
/// real kills, each ending with the installed image's hash checked; `--legacy-run INDEX` replays one of them alone.
/// `--run INDEX` and `--no-kills` leave them out.
@main
struct FaultCampaign {
    /// The command line of the campaign.
    struct Options {
        var runs = 200
        var seed: UInt64 = 1
        var attempts = 12
        var timeoutMs = 1000
        var verbose = false
        var capture: String?
        var only: Int?
        var killShare = 0.0
        var noKills = false
        var flashFaults = true
        var legacyRuns = 4
        var legacyOnly: Int?
        var setup = ProcessSetup(
            bledfu: ProcessSetup.defaultBledfu(),
            root: URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
                "bledfu-campaign-\(ProcessInfo.processInfo.processIdentifier)"),
            keepFiles: false, speedup: 20, timeoutSeconds: 2, processLimitSeconds: 120)

        static let usage =
            "usage: FuzzFaultCampaign [--runs N] [--seed S] [--attempts N] [--timeout-ms MS] [--verbose] "
            + "[--run INDEX] [--kill-share P] [--no-kills] [--bledfu PATH] [--speedup K] [--keep-files DIR] [--capture DIR] [--no-flash-faults] "
            + "[--legacy-runs N] [--legacy-run INDEX]"

        /// Parses `arguments` (without the program name); nil for an unknown argument.
        init?(_ arguments: ArraySlice<String>) {
            var arguments = arguments
            while let argument = arguments.popFirst() {
                switch argument {
                case "--runs": runs = arguments.popFirst().flatMap { Int($0) } ?? runs
                case "--seed": seed = arguments.popFirst().flatMap { UInt64($0) } ?? seed
                case "--attempts": attempts = arguments.popFirst().flatMap { Int($0) } ?? attempts
                case "--timeout-ms": timeoutMs = arguments.popFirst().flatMap { Int($0) } ?? timeoutMs
                case "--verbose": verbose = true
                case "--capture": capture = arguments.popFirst()
                case "--run": only = arguments.popFirst().flatMap { Int($0) }
                case "--kill-share": killShare = arguments.popFirst().flatMap { Double($0) } ?? killShare
                case "--no-kills": noKills = true
                case "--flash-faults": flashFaults = true
                case "--no-flash-faults": flashFaults = false
                case "--legacy-runs": legacyRuns = arguments.popFirst().flatMap { Int($0) } ?? legacyRuns
                case "--legacy-run": legacyOnly = arguments.popFirst().flatMap { Int($0) }
                case "--bledfu": setup.bledfu = arguments.popFirst().map { URL(fileURLWithPath: $0) } ?? setup.bledfu
                case "--speedup": setup.speedup = arguments.popFirst().flatMap { Double($0) } ?? setup.speedup
                case "--keep-files":
                    setup.root = arguments.popFirst().map { URL(fileURLWithPath: $0) } ?? setup.root
                    setup.keepFiles = true
                default: return nil
                }
            }
        }

        /// The runs to make (none when `--legacy-run` picks one Legacy run).
        var plans: [RunPlan] {
            let indices = legacyOnly != nil ? [] : only.map { [$0] } ?? Array(0..<runs)
            var plans = indices.map {
                RunPlan(index: $0, campaignSeed: seed, killShare: killShare, flashFaults: flashFaults)
            }
            if noKills {
                for index in plans.indices { plans[index].killsAfterBytes = [] }
            }
            return plans
        }

        /// The Legacy runs to make: `--legacy-run`'s, else `--legacy-runs` of them (none with `--run` or `--no-kills`).
        var legacyPlans: [LegacyRunPlan] {
            (legacyOnly.map { [$0] } ?? (only != nil || noKills ? [] : Array(0..<max(0, legacyRuns))))
                .map { LegacyRunPlan(index: $0, campaignSeed: seed) }
        }
    }

    static func main() async {
        guard let options = Options(CommandLine.arguments.dropFirst()) else {
            print(Options.usage)
            exit(2)
        }
        if let capture = options.capture {
            exit(await Self.capture(into: capture) ? 0 : 1)
        }
        let plans = options.plans
        let legacyPlans = options.legacyPlans
        if plans.contains(where: { !$0.killsAfterBytes.isEmpty }) || !legacyPlans.isEmpty,
            !FileManager.default.isExecutableFile(atPath: options.setup.bledfu.path)
        {
            print("FuzzFaultCampaign: no bledfu executable at \(options.setup.bledfu.path) (build it, or name it with --bledfu)")
            exit(2)
        }
        let clock = ContinuousClock()
        let start = clock.now
        var reports: [RunReport] = []
        for plan in plans {
            let report: RunReport
            if plan.killsAfterBytes.isEmpty {
                let run = CampaignRun(
                    plan: plan, maxAttempts: options.attempts, checkpointTimeout: .milliseconds(options.timeoutMs))
                report = await run.run()
            } else {
                report = ProcessKillRun(plan: plan, setup: options.setup, maxReruns: 3).run()
            }
            reports.append(report)
            if options.verbose || report.verdict == .violation {
                printReport(report, plan: plan, verbose: options.verbose)
            }
        }
        let legacy = legacyPlans.map { plan in
            let report = LegacyProcessRun(plan: plan, setup: options.setup, maxReruns: 3).run()
            if options.verbose || report.verdict == .violation {
                print("\(report.verdict.rawValue): \(plan) | \(report.note)")
                for process in report.processes { print("    \(process)") }
            }
            return report
        }
        if !options.setup.keepFiles { try? FileManager.default.removeItem(at: options.setup.root) }
        if !plans.isEmpty {
            print(CampaignSummary(reports: reports, seed: options.seed, elapsed: start.duration(to: clock.now)).text)
        }
        print(LegacyCampaignSummary(reports: legacy).text)
        exit(reports.contains { $0.verdict == .violation } || legacy.contains { $0.verdict == .violation } ? 1 : 0)
    }

    /// One run's line (and, for a violation or with `--verbose`, its processes or errors).
    static func printReport(_ report: RunReport, plan: RunPlan, verbose: Bool) {
        var fired: [String: Int] = [:]
        for kind in report.faultsFired { fired[kind, default: 0] += 1 }
        let firedText = fired.sorted { $0.key < $1.key }.map { $0.value == 1 ? $0.key : "\($0.key)×\($0.value)" }
        print(
            "\(report.verdict.rawValue): \(plan) | attempts \(report.attempts), resent \(report.bytesResent) B, "
                + "fired \(firedText.joined(separator: "+"))\(report.note.isEmpty ? "" : " | " + report.note)")
        if report.viaProcesses {
            for process in report.processes { print("    \(process)") }
        } else if verbose {
            for error in report.errors { print("    \(error)") }
        }
    }

    /// One clean upload whose PDUs (both directions) are written to `directory`, a few of each opcode: seeds for
    /// the ATT fuzz targets (tools/fuzz, FUZZ_CAPTURE).
    static func capture(into directory: String) async -> Bool {
        let recorder = PDURecorder()
        var plan = RunPlan(index: 0, campaignSeed: 0)
        plan.faults = .init()
        plan.killsAfterBytes = []
        plan.mtu = 247
        plan.imageSize = 9000
        var run = CampaignRun(plan: plan, maxAttempts: 1, checkpointTimeout: .seconds(5))
        run.observer = recorder
        let report = await run.run()
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var written = 0
        for (index, pdu) in recorder.distinct.enumerated() {
            let path = "\(directory)/pdu-\(index)-\(String(format: "%02x", pdu.first ?? 0))"
            if FileManager.default.createFile(atPath: path, contents: Data(pdu)) { written += 1 }
        }
        print("captured \(written) PDU(s) of a \(report.verdict.rawValue) upload into \(directory)")
        return report.verdict == .verified && written > 0
    }
}

/// Keeps up to four PDUs per opcode and length.
final class PDURecorder: PDUObserver {
    private let seen = Mutex<(keys: [String: Int], pdus: [[UInt8]])>(([:], []))

    func observe(pdu: [UInt8], sent: Bool) {
        let key = "\(pdu.first ?? 0)-\(pdu.count)"
        seen.withLock { state in
            guard state.keys[key, default: 0] < 4 else { return }
            state.keys[key, default: 0] += 1
            state.pdus.append(pdu)
        }
    }

    var distinct: [[UInt8]] { seen.withLock { $0.pdus } }
}
