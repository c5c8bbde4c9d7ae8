import Foundation

/// The campaign's figures, as printed at the end (docs/reliability.md quotes them).
struct CampaignSummary {
    let reports: [RunReport]
    let seed: UInt64
    let elapsed: Duration

    /// One object (4096 bytes, the nRF52 data object) plus the init packet: what a resume may need to resend.
    static let resendBound = 4096 + 160

    var text: String {
        var lines: [String] = []
        let count = reports.count
        let verified = reports.filter { $0.verdict == .verified }.count
        let resumable = reports.filter { $0.verdict == .clearErrorResumable }.count
        let violations = reports.filter { $0.verdict == .violation }.count
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        lines.append("fault campaign: \(count) run(s), seed \(seed), \(String(format: "%.1f", seconds)) s")
        lines.append("  verified image:            \(verified)")
        let confirmed = reports.filter(\.confirmedAfterLoss).count
        lines.append("    of which after an error:  \(confirmed) (link lost around the last Execute; the device had installed it)")
        lines.append("  clear error, resumable:    \(resumable)")
        lines.append("  violations:                \(violations)")
        let falseSuccesses = reports.filter { $0.falseSuccesses > 0 }
        let healed = falseSuccesses.filter { $0.note.contains("later attempt installed") }.count
        lines.append(
            "    of which false success:  \(falseSuccesses.count) (engine reported completion, device had no image; "
                + "\(healed) installed by a later attempt)")
        let wrong = reports.filter { $0.note.hasPrefix("WRONG IMAGE") }.count
        lines.append("    of which wrong image:    \(wrong)")
        let attempts = reports.map(\.attempts)
        lines.append(
            "  attempts:                  \(attempts.reduce(0, +)) in all, at most \(attempts.max() ?? 0) for one run")
        var planned: [CampaignFault: Int] = [:]
        for report in reports { for kind in report.plan.kinds { planned[kind, default: 0] += 1 } }
        lines.append("  runs per planned fault:    " + planned.sorted { $0.key < $1.key }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", "))
        var fired: [String: Int] = [:]
        for report in reports { for kind in report.faultsFired { fired[kind, default: 0] += 1 } }
        lines.append("  faults fired:              " + fired.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        let returning = reports.filter { $0.plan.oldApplication }
        let powerLosses = returning.filter { $0.faultsFired.contains("power-loss") }
        lines.append(
            "  old application back:      \(returning.count) run(s) with one, \(powerLosses.count) with a power loss fired, "
                + "\(returning.map(\.applicationReturns).reduce(0, +)) reconnect(s) found it and jumped again")
        let interruptions = reports.map(\.interruptions).reduce(0, +)
        lines.append("  interrupted attempts:      \(interruptions)")
        // Bytes resent per disconnect, from runs whose faults only drop the link (disconnects and kills; no drops,
        // corruption, rejections, stalls or power loss, which cost resends of their own). A bootloader without
        // save_progress forgets all data progress on a disconnect, so the goal (one object + init per
        // disconnect) applies to save_progress devices; the others are listed for comparison.
        for keeps in [true, false] {
            let pure = reports.filter {
                !$0.viaProcesses && $0.interruptions > 0 && $0.plan.saveProgress == keeps
                    && $0.plan.kinds.allSatisfy(\.interruptsOnly)
            }
            let label = keeps ? "save_progress on " : "save_progress off"
            guard !pure.isEmpty else {
                lines.append("  resent/disconnect, \(label): no run with disconnects only")
                continue
            }
            let sorted = pure.map { Double($0.bytesResent) / Double($0.interruptions) }.sorted()
            let mean = sorted.reduce(0, +) / Double(sorted.count)
            let over = pure.filter { $0.bytesResent > $0.interruptions * Self.resendBound }.count
            lines.append(
                "  resent/disconnect, \(label): mean \(Int(mean)) B, median \(Int(sorted[sorted.count / 2])) B, "
                    + "max \(Int(sorted.last ?? 0)) B over \(pure.count) run(s); \(over) above one object + init "
                    + "(\(Self.resendBound) B)")
        }
        lines += killLines
        let total = reports.map(\.bytesResent).reduce(0, +)
        let written = reports.map(\.bytesWritten).reduce(0, +)
        lines.append("  bytes written:             \(written) in all, \(total) resent (all faults)")
        return lines.joined(separator: "\n")
    }

    /// The real kills (``ProcessKillRun``): how many, the reruns' exit statuses, bytes resent per kill.
    var killLines: [String] {
        let runs = reports.filter(\.viaProcesses)
        guard !runs.isEmpty else { return ["  real kills:                no run drew a kill"] }
        var lines: [String] = []
        let kills = runs.map(\.killsFired).reduce(0, +)
        let planned = runs.map(\.plan.killsAfterBytes.count).reduce(0, +)
        lines.append(
            "  real kills (SIGKILL of bledfu flash/resume): \(kills) in \(runs.count) run(s) "
                + "(\(planned - kills) planned kill(s) not fired: that process had ended first)")
        var statuses: [String: Int] = [:]
        for run in runs {
            for process in run.processes where process.killedAtBytes == nil {
                statuses["\(process.command) \(process.status.map(String.init) ?? "hung")", default: 0] += 1
            }
        }
        lines.append(
            "    unkilled processes' exit statuses: " + statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
                .joined(separator: ", "))
        let errors = Set(runs.flatMap(\.processes).filter { $0.killedAtBytes == nil && $0.status != 0 }
            .compactMap(\.errorLines.first).map { String($0.prefix(70)) })
        for error in errors.sorted().prefix(8) { lines.append("    error line:              \(error)") }
        // Bytes the device received beyond one copy (init packet + image), per interruption (kills and the
        // disconnects the device made), in runs whose faults only interrupt the link and which ended verified
        // without a restored device.
        for keeps in [true, false] {
            let pure = runs.filter {
                $0.killsFired > 0 && $0.plan.saveProgress == keeps && $0.plan.kinds.allSatisfy(\.interruptsOnly)
                    && $0.verdict == .verified
            }
            let label = keeps ? "save_progress on " : "save_progress off"
            guard !pure.isEmpty else {
                lines.append("    resent/kill, \(label):  no run with kills and disconnects only")
                continue
            }
            func interruptions(_ run: RunReport) -> Int { run.faultsFired.filter { $0 == "kill" || $0 == "disconnect" }.count }
            let sorted = pure.map { Double($0.bytesResent) / Double(max(1, interruptions($0))) }.sorted()
            let over = pure.filter { $0.bytesResent > interruptions($0) * Self.resendBound }.count
            lines.append(
                "    resent/kill, \(label):  median \(Int(sorted[sorted.count / 2])) B, max \(Int(sorted.last ?? 0)) B "
                    + "per kill or disconnect over \(pure.count) run(s) with only those faults; \(over) above one "
                    + "object + init (\(Self.resendBound) B)")
        }
        return lines
    }
}
