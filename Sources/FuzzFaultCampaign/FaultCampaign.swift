import BLECore
import DFUSimulator
import Foundation
import Synchronization

/// The fault campaign (tools/fault-campaign, docs/reliability.md): uploads to virtual devices with seeded random
/// faults, each run ending in a verified image or a clear error with a resumable device. Exit status 1 on any
/// violation.
///
///     FuzzFaultCampaign [--runs N] [--seed S] [--attempts N] [--timeout-ms MS] [--verbose] [--run INDEX]
///                       [--capture DIR]
///
/// `--run INDEX` replays one run of the campaign (the plan depends only on the seed and the index).
@main
struct FaultCampaign {
    static func main() async {
        var runs = 200
        var seed: UInt64 = 1
        var attempts = 12
        var timeoutMs = 1000
        var verbose = false
        var capture: String?
        var only: Int?
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            switch argument {
            case "--runs": runs = arguments.popFirst().flatMap { Int($0) } ?? runs
            case "--seed": seed = arguments.popFirst().flatMap { UInt64($0) } ?? seed
            case "--attempts": attempts = arguments.popFirst().flatMap { Int($0) } ?? attempts
            case "--timeout-ms": timeoutMs = arguments.popFirst().flatMap { Int($0) } ?? timeoutMs
            case "--verbose": verbose = true
            case "--capture": capture = arguments.popFirst()
            case "--run": only = arguments.popFirst().flatMap { Int($0) }
            default:
                print("usage: FuzzFaultCampaign [--runs N] [--seed S] [--attempts N] [--timeout-ms MS] [--verbose] [--run INDEX] [--capture DIR]")
                exit(2)
            }
        }
        if let capture {
            exit(await Self.capture(into: capture) ? 0 : 1)
        }
        let clock = ContinuousClock()
        let start = clock.now
        var reports: [RunReport] = []
        for index in only.map({ [$0] }) ?? Array(0..<runs) {
            let plan = RunPlan(index: index, campaignSeed: seed)
            let run = CampaignRun(plan: plan, maxAttempts: attempts, checkpointTimeout: .milliseconds(timeoutMs))
            let report = await run.run()
            reports.append(report)
            if verbose || report.verdict == .violation {
                print(
                    "\(report.verdict.rawValue): \(plan) | attempts \(report.attempts), resent \(report.bytesResent) B, "
                        + "fired \(report.faultsFired.joined(separator: "+"))\(report.note.isEmpty ? "" : " | " + report.note)")
                if verbose { for error in report.errors { print("    \(error)") } }
            }
        }
        let elapsed = start.duration(to: clock.now)
        print(CampaignSummary(reports: reports, seed: seed, elapsed: elapsed).text)
        exit(reports.contains { $0.verdict == .violation } ? 1 : 0)
    }

    /// One clean upload whose PDUs (both directions) are written to `directory`, a few of each opcode: seeds for
    /// the ATT fuzz targets (tools/fuzz, FUZZ_CAPTURE).
    static func capture(into directory: String) async -> Bool {
        let recorder = PDURecorder()
        var plan = RunPlan(index: 0, campaignSeed: 0)
        plan.faults = .init()
        plan.killsAfterPackets = []
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
