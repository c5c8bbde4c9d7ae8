import Foundation

/// The Legacy runs' figures, printed after the Secure DFU summary (docs/reliability.md quotes them).
struct LegacyCampaignSummary {
    let reports: [LegacyRunReport]

    var text: String {
        guard !reports.isEmpty else { return "legacy runs: none (--legacy-runs 0)" }
        var lines: [String] = []
        let verified = reports.filter { $0.verdict == .verified }.count
        let violations = reports.filter { $0.verdict == .violation }.count
        lines.append("legacy runs: \(reports.count) (profiles \(Set(reports.map(\.plan.device.profile)).sorted().joined(separator: ", ")))")
        lines.append("  verified image (installed SHA-256 checked): \(verified)")
        lines.append("  violations:                \(violations)")
        let kills = reports.map(\.killsFired).reduce(0, +)
        let planned = reports.map(\.plan.killsAfterBytes.count).reduce(0, +)
        lines.append("  real kills (SIGKILL of bledfu flash/resume): \(kills) (\(planned - kills) planned kill(s) not fired: that process had ended first)")
        let disconnects = reports.map(\.disconnectsFired).reduce(0, +)
        let plannedDisconnects = reports.map(\.plan.disconnectsAfterBytes.count).reduce(0, +)
        lines.append("  disconnects at seeded offsets: \(disconnects) fired of \(plannedDisconnects) planned")
        var statuses: [String: Int] = [:]
        for report in reports {
            for process in report.processes where process.killedAtBytes == nil {
                statuses["\(process.command) \(process.status.map(String.init) ?? "hung")", default: 0] += 1
            }
        }
        lines.append(
            "  unkilled processes' exit statuses: " + statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
        // Legacy DFU restarts an image from zero: what an interruption costs is up to one image.
        let interrupted = reports.filter { $0.killsFired + $0.disconnectsFired > 0 && $0.verdict == .verified }
        if !interrupted.isEmpty {
            let perInterruption = interrupted.map { Double($0.bytesResent) / Double($0.killsFired + $0.disconnectsFired) }.sorted()
            let overImage = interrupted.filter { $0.bytesResent > ($0.killsFired + $0.disconnectsFired) * ($0.plan.imageSize + 38) }.count
            lines.append(
                "  resent/interruption:       median \(Int(perInterruption[perInterruption.count / 2])) B, max \(Int(perInterruption.last ?? 0)) B "
                    + "over \(interrupted.count) run(s); \(overImage) above one attempt per interruption (image, init packet, sizes and a busy Start's sizes)")
        }
        return lines.joined(separator: "\n")
    }
}
