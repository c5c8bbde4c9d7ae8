import DFUSimulator
import Foundation

/// How one Legacy run ended.
struct LegacyRunReport {
    var plan: LegacyRunPlan
    var verdict: RunVerdict = .violation
    var processes: [UploadProcessResult] = []
    var killsFired = 0
    var disconnectsFired = 0
    /// Packet bytes the device received over the run, and those beyond one attempt's (sizes, init packet, image).
    var bytesReceived = 0
    var bytesResent = 0
    var note = ""
}

/// One Legacy upload of the campaign, through real processes: `bledfu simulate --device PROFILE` hosts the device
/// with the plan's disconnects (it outlives every upload process); `bledfu flash PKG --state-dir DIR` runs and is sent
/// SIGKILL once the device has received each kill's Packet bytes; then `bledfu resume` (or `bledfu flash` while no
/// journal was written) reruns it until an exit status 0 or `maxReruns` failed reruns. Legacy DFU cannot resume
/// inside an image: every rerun sends it from zero (resetting a bootloader that still holds the killed attempt).
///
/// Verdict: verified when the device's installed application's SHA-256 is the image's and the last process exited 0;
/// a violation otherwise (a wrong image, success claimed without the image, a process that printed anything but one
/// `bledfu: error:` line, a hang, or reruns that never finished: every fault fires once, so a rerun must).
struct LegacyProcessRun {
    let plan: LegacyRunPlan
    let setup: ProcessSetup
    let maxReruns: Int

    func run() -> LegacyRunReport {
        var report = LegacyRunReport(plan: plan)
        if let failure = setup.inRunDirectory("legacy-run-\(plan.index)", { try upload(in: $0, into: &report) }) {
            report.verdict = .violation
            report.note = failure
        }
        return report
    }

    private func upload(in directory: URL, into report: inout LegacyRunReport) throws {
        let image = plan.image
        let expected = DFUSimulatorDigest.sha256Hex(image)
        let package = try makePackage(image, in: directory)
        let journal = directory.appendingPathComponent("journal")
        // The device's own process with the run's disconnects; its status file is a `LegacyDeviceState`.
        var options = ["--speedup", String(format: "%g", setup.speedup / 2)]
        if !plan.faults.isEmpty { options += ["--fault", plan.faults.joined(separator: ",")] }
        let simulator = try SimulatorChild<LegacyDeviceState>(
            setup: setup, directory: directory, device: plan.device.profile, address: plan.device.address,
            options: options, name: "simulate")
        defer { simulator.stop() }
        var lastStatus: Int32?
        for threshold in plan.killsAfterBytes where lastStatus != 0 {
            let result = try runUpload(package: package, journal: journal, simulator: simulator, killAt: threshold, number: report.processes.count)
            report.processes.append(result)
            if result.killedAtBytes != nil { report.killsFired += 1 } else { lastStatus = result.status }
            if result.isHang { break }
        }
        var reruns = 0
        while lastStatus != 0, reruns < maxReruns, !report.processes.contains(where: \.isHang) {
            reruns += 1
            let result = try runUpload(package: package, journal: journal, simulator: simulator, killAt: nil, number: report.processes.count)
            report.processes.append(result)
            lastStatus = result.status
        }
        var state = simulator.state()
        if lastStatus == 0 {
            // The device resets into the new application after Activate: its status follows the exit.
            for _ in 0..<500 where state?.installed.application?.sha256.lowercased() != expected {
                usleep(10_000)
                state = simulator.state()
            }
        }
        report.disconnectsFired = state?.faults.filter { $0.kind == "disconnect" }.count ?? 0
        report.bytesReceived = Int(state?.counters.bytesReceived ?? 0)
        report.bytesResent = max(0, report.bytesReceived - (12 + 14 + image.count))
        let installed = state?.installed.application?.sha256.lowercased()
        let unclear = report.processes.filter { $0.killedAtBytes == nil && $0.status != 0 && !$0.clearError }
        if state == nil {
            report.note = "no device status"
        } else if let installed, !installed.isEmpty, installed != expected {
            report.note = "WRONG IMAGE installed: \(installed)"
        } else if let hang = report.processes.first(where: \.isHang) {
            report.note = "bledfu did not end within \(Int(setup.processLimitSeconds)) s: \(hang)"
        } else if lastStatus == 0, installed != expected {
            report.note = "bledfu exited 0, the device does not hold the image"
        } else if !unclear.isEmpty {
            report.note = "unclear error: \(unclear.map(\.description))"
        } else if installed == expected, lastStatus == 0 {
            report.verdict = .verified
        } else {
            report.note = "the reruns did not finish the image (mode \(state?.mode.rawValue ?? "?")): "
                + report.processes.filter { $0.killedAtBytes == nil }.map(\.description).joined(separator: " / ")
        }
    }

    /// `bledfu flash` (or `bledfu resume` once a journal exists), killed at `killAt` device Packet bytes when given.
    private func runUpload(package: URL, journal: URL, simulator: SimulatorChild<LegacyDeviceState>, killAt: Int?, number: Int) throws
        -> UploadProcessResult
    {
        let hasJournal = ((try? FileManager.default.contentsOfDirectory(atPath: journal.path)) ?? []).contains {
            $0.hasSuffix(".json") && !$0.hasPrefix(".")
        }
        let common = [
            "--adapter", "virtual:\(simulator.radio.path)", "--state-dir", journal.path, "--json", "--mode", plan.pacing,
            "--timeout", "10", "--reconnect-attempts", "3", "--reboot-delay", "0.1", "--scan-timeout", "10",
        ]
        let command = hasJournal ? "resume" : "flash"
        let arguments = hasJournal ? ["resume"] + common : ["flash", package.path, "--device", plan.device.address] + common
        let child = try ChildProcess(
            setup.bledfu, arguments, output: journal.deletingLastPathComponent().appendingPathComponent("p\(number)"))
        var gauge = ByteGauge()
        while child.isRunning, child.elapsed < setup.processLimitSeconds {
            if let killAt, let bytes = simulator.bytesReceived(), gauge.estimate(bytes, now: Date()) >= killAt {
                child.killNow()
                for _ in 0..<200 where simulator.state()?.connected != false { usleep(5_000) }
                return UploadProcessResult(command: command, child: child, killedAtBytes: simulator.bytesReceived() ?? bytes)
            }
            usleep(1_000)
        }
        if child.isRunning {
            child.killNow()
            var result = UploadProcessResult(command: command, child: child, killedAtBytes: nil)
            result.status = nil
            return result
        }
        return UploadProcessResult(command: command, child: child, killedAtBytes: nil)
    }

    /// `bledfu package create --dfu-ver 0.5` with the run's image and the device's options.
    private func makePackage(_ image: [UInt8], in directory: URL) throws -> URL {
        let bin = directory.appendingPathComponent("app.bin")
        try Data(image).write(to: bin)
        let package = directory.appendingPathComponent("app.zip")
        let create = try ChildProcess(
            setup.bledfu,
            ["package", "create", "--application", bin.path, "--application-version", "2", "--dfu-ver", "0.5"]
                + plan.device.packageOptions + [package.path],
            output: directory.appendingPathComponent("package-create"))
        guard create.wait(seconds: 60), create.status == 0 else {
            create.killNow()
            throw CampaignSetupError("bledfu package create failed: \(create.stderr)")
        }
        return package
    }
}
