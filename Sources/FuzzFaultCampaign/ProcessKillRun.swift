import BLECore
import DFUPackage
import DFUSimulator
import Foundation
import SecureDFU

/// One upload of the campaign whose plan drew a kill, through real processes: a `bledfu simulate` child hosts the
/// virtual device (with the run's other faults) and outlives every upload process; `bledfu flash PKG --state-dir
/// DIR` runs as a child and is sent SIGKILL once the device has received the plan's number of Packet bytes (polled
/// from the device's status file); then `bledfu resume` (or `bledfu flash` again while no journal was written)
/// reruns it, until an exit status 0 or `maxReruns` reruns failed. Verdicts as for ``CampaignRun``, plus: every
/// rerun that fails prints exactly one `bledfu: error:` line, and when the reruns give up, a fresh simulator on
/// the device's state directory (same flash and settings, no faults) lets one more `bledfu resume` finish.
struct ProcessKillRun {
    let plan: RunPlan
    let setup: ProcessSetup
    let maxReruns: Int

    /// The device's identity address (its bootloader advertises at + 1).
    static let address = "C0:11:22:33:44:F0"

    /// The device keeps its flash in `directory/device` (a restored simulator finds it there).
    static func simulateOptions(directory: URL, faults: [String]) -> [String] {
        ["--state-dir", directory.appendingPathComponent("device").path]
            + (faults.isEmpty ? [] : ["--fault", faults.joined(separator: ",")])
    }

    func run() -> RunReport {
        var report = RunReport(
            plan: plan, verdict: .violation, attempts: 0, interruptions: 0, bytesWritten: 0, bytesResent: 0,
            faultsFired: [], errors: [], note: "")
        report.viaProcesses = true
        if let failure = setup.inRunDirectory("run-\(plan.index)", { try upload(in: $0, into: &report) }) {
            report.verdict = .violation
            report.note = failure
        }
        return report
    }

    /// The package, the device, the kills, the reruns and the verdict.
    private func upload(in directory: URL, into report: inout RunReport) throws {
        let (package, part) = try makePackage(in: directory)
        let expected = DFUSimulatorDigest.sha256Hex(part.image)
        let profile = try writeProfile(in: directory)
        let journal = directory.appendingPathComponent("journal")
        let faults = plan.items.filter { !$0.hasPrefix("seed=") }.isEmpty ? [] : plan.items
        let simulator = try SimulatorChild<DeviceState>(
            setup: setup, directory: directory, device: profile.path, address: Self.address,
            options: Self.simulateOptions(directory: directory, faults: faults), name: "simulate")
        defer { simulator.stop() }
        let (processes, lastStatus) = try killsAndReruns(
            package: package, journal: journal, simulator: simulator,
            firstObjectEnd: part.initPacket.count + min(Self.objectSize, part.image.count), into: &report)
        report.attempts = processes.count
        report.processes = processes
        report.errors = processes.filter { $0.status != 0 }.map(\.description)
        report.interruptions = processes.filter { $0.status != 0 }.count
        // The device after the last process: a success must have installed the image (it resets into it).
        let state = lastStatus == 0 ? Self.state(of: simulator, installing: expected) : simulator.state()
        report.faultsFired = (state?.faults.map(\.kind) ?? []) + Array(repeating: "kill", count: report.killsFired)
        report.bytesWritten = Int(state?.counters.bytesReceived ?? 0)
        report.bytesResent = max(0, report.bytesWritten - part.image.count - part.initPacket.count)
        let installed = state?.installed.application?.sha256.lowercased()
        let unclear = processes.filter { $0.killedAtBytes == nil && $0.status != 0 && !$0.clearError }
        if state == nil {
            report.note = "no device status"
        } else if let installed, !installed.isEmpty, installed != expected {
            report.note = "WRONG IMAGE installed: \(installed)"
        } else if let hang = processes.first(where: \.isHang) {
            report.note = "bledfu did not end within \(Int(setup.processLimitSeconds)) s: \(hang)"
        } else if lastStatus == 0, installed != expected {
            report.falseSuccesses += 1
            report.note = "bledfu exited 0, the device has no valid image"
        } else if !unclear.isEmpty {
            report.note = "unclear error: \(unclear.map(\.description))"
        } else if installed == expected {
            report.verdict = .verified
            report.confirmedAfterLoss = lastStatus != 0
        } else {
            simulator.stop()
            try resumeOnRestored(
                package: package, journal: journal, directory: directory, profile: profile, expected: expected,
                number: processes.count, into: &report)
        }
    }

    /// The upload processes: one per kill threshold (each killed once the device has received that many bytes),
    /// then reruns until one succeeds (at most ``maxReruns``). Returns them and the last one's exit status.
    private func killsAndReruns(
        package: URL, journal: URL, simulator: SimulatorChild<DeviceState>, firstObjectEnd: Int, into report: inout RunReport
    ) throws -> ([UploadProcessResult], Int32?) {
        var processes: [UploadProcessResult] = []
        var lastStatus: Int32?
        for threshold in plan.killsAfterBytes where lastStatus != 0 {
            let result = try runUpload(
                package: package, journal: journal, simulator: simulator, killAt: threshold, number: processes.count,
                firstObjectEnd: firstObjectEnd)
            processes.append(result)
            if let bytes = result.killedAtBytes {
                report.killsFired += 1
                report.killBytes.append(bytes)
            } else {
                lastStatus = result.status
            }
            if result.status == nil, result.killedAtBytes == nil { break }  // a hang
        }
        var reruns = 0
        while lastStatus != 0, reruns < maxReruns, !processes.contains(where: \.isHang) {
            reruns += 1
            let result = try runUpload(
                package: package, journal: journal, simulator: simulator, killAt: nil, number: processes.count)
            processes.append(result)
            lastStatus = result.status
        }
        return (processes, lastStatus)
    }

    /// Resumable: the device as it was left (flash and settings from its state directory), without faults, takes
    /// one more upload to the end.
    private func resumeOnRestored(
        package: URL, journal: URL, directory: URL, profile: URL, expected: String, number: Int,
        into report: inout RunReport
    ) throws {
        let restored = try SimulatorChild<DeviceState>(
            setup: setup, directory: directory, device: profile.path, address: Self.address,
            options: Self.simulateOptions(directory: directory, faults: []), name: "simulate-restored")
        defer { restored.stop() }
        let next = try runUpload(package: package, journal: journal, simulator: restored, killAt: nil, number: number)
        report.processes.append(next)
        let after = Self.state(of: restored, installing: expected)
        if next.status == 0, after?.installed.application?.sha256.lowercased() == expected {
            report.verdict = .clearErrorResumable
        } else {
            report.note = "device left unable to take the next attempt: \(next)"
        }
    }

    /// The simulator's status once it reports `expected` installed (it resets into the image after the process
    /// ended), or after 3 s of 10 ms looks at its status file (a child process: no event to wait on).
    private static func state(of simulator: SimulatorChild<DeviceState>, installing expected: String) -> DeviceState? {
        var state = simulator.state()
        for _ in 0..<300 where state?.installed.application?.sha256.lowercased() != expected {
            usleep(10_000)
            state = simulator.state()
        }
        return state
    }

    /// The bootloader's data object size (Select Data's maximum, nRF5 SDK 15-17).
    static let objectSize = 4096

    /// `bledfu flash` (or `bledfu resume` once a journal exists), killed at `killAt` device bytes when given.
    ///
    /// A kill beyond the first data object (`firstObjectEnd` bytes, init packet included) also waits until the
    /// journal has been written (renamed into place, not merely begun): the byte estimate runs up to an object
    /// ahead of the device's status file, and a loaded host lags in writing the journal after the Execute response,
    /// so without that wait the same seed would rerun `bledfu flash` (no journal yet) on one machine and
    /// `bledfu resume` on another.
    private func runUpload(
        package: URL, journal: URL, simulator: SimulatorChild<DeviceState>, killAt: Int?, number: Int, firstObjectEnd: Int = 0
    ) throws -> UploadProcessResult {
        // A journal file as `bledfu resume` finds it (JournalFileStore.all): `<address>-<sha>.json`. The temporary
        // `.<name>.<pid>.tmp` a save writes before its rename is not one: a kill between the two leaves no journal.
        func journalWritten() -> Bool {
            ((try? FileManager.default.contentsOfDirectory(atPath: journal.path)) ?? []).contains {
                $0.hasSuffix(".json") && !$0.hasPrefix(".")
            }
        }
        let hasJournal = journalWritten()
        let radio = "virtual:" + simulator.statusFile.deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("radio").path
        let common = [
            "--adapter", radio, "--state-dir", journal.path, "--json", "--mode", plan.pacing,
            "--timeout", String(format: "%g", setup.timeoutSeconds), "--reconnect-attempts", "3",
            "--reboot-delay", "0.1", "--scan-timeout", "5",
        ]
        let command = hasJournal ? "resume" : "flash"
        let arguments = hasJournal ? ["resume"] + common : ["flash", package.path, "--device", Self.address] + common
        let child = try ChildProcess(
            setup.bledfu, arguments, output: journal.deletingLastPathComponent().appendingPathComponent("p\(number)"))
        var gauge = ByteGauge()
        while child.isRunning, child.elapsed < setup.processLimitSeconds {
            if let killAt, let bytes = simulator.bytesReceived(), gauge.estimate(bytes, now: Date()) >= killAt,
                killAt < firstObjectEnd || journalWritten()
            {
                child.killNow()
                // The device notices the closed link and publishes its state: the bytes it had at the kill.
                for _ in 0..<200 where simulator.state()?.connected != false { usleep(5_000) }
                return UploadProcessResult(
                    command: command, child: child, killedAtBytes: simulator.bytesReceived() ?? bytes)
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

    /// `bledfu package create` with the run's image: an unsigned application package (hw 52, sd-req 0xB7).
    private func makePackage(in directory: URL) throws -> (URL, DFUPart) {
        let image = CampaignRun(plan: plan, maxAttempts: 1, checkpointTimeout: .seconds(1)).image()
        let bin = directory.appendingPathComponent("app.bin")
        try Data(image).write(to: bin)
        let package = directory.appendingPathComponent("app.zip")
        let create = try ChildProcess(
            setup.bledfu,
            [
                "package", "create", "--application", bin.path, "--application-version", "2", "--hw-version", "52",
                "--sd-req", "0xB7", package.path,
            ], output: directory.appendingPathComponent("package-create"))
        guard create.wait(seconds: 60), create.status == 0 else {
            create.killNow()
            throw CampaignSetupError("bledfu package create failed: \(create.stderr)")
        }
        let bytes = try Data(contentsOf: package)
        guard let part = try DFUPart.parts(of: FirmwarePackage(bytes: Array(bytes))).first else {
            throw CampaignSetupError("the package has no part")
        }
        return (package, part)
    }

    /// The device's profile JSON: a bootloader without an application, the run's MTU and save_progress, unsigned
    /// updates accepted, link and flash times divided by the setup's speedup.
    private func writeProfile(in directory: URL) throws -> URL {
        guard let address = BluetoothAddress(Self.address) else { throw CampaignSetupError("bad address") }
        let profile = DeviceProfile(
            name: "Campaign", address: address, saveProgress: plan.saveProgress, requireSignedApp: false,
            installed: InstalledImages(application: nil, bootloader: InstalledImage(version: 1), softdevice: nil),
            link: LinkParameters(maxMTU: Int(plan.mtu), receiveBuffers: 64),
            flash: FlashParameters(queueDepth: 64, bankSize: 200_704), speedup: setup.speedup)
        let url = directory.appendingPathComponent("profile.json")
        try JSONEncoder().encode(profile).write(to: url)
        return url
    }
}

extension UploadProcessResult {
    /// Killed by the campaign because it ran past the process limit.
    var isHang: Bool { status == nil && killedAtBytes == nil }
}

/// The device's Packet bytes now, estimated between its status updates. The simulator publishes its state on
/// Control Point writes (checkpoints, object ends) and link events, not on every packet, so the bytes since the
/// last update are extrapolated at the rate between the last two updates (at most one object ahead): kills land
/// inside objects, not only on their checkpoints.
struct ByteGauge {
    private var last: (bytes: Int, time: Date)?
    private var rate = 0.0

    mutating func estimate(_ published: Int, now: Date) -> Int {
        guard let last, published == last.bytes else {
            if let last, published > last.bytes {
                rate = Double(published - last.bytes) / max(now.timeIntervalSince(last.time), 0.001)
            }
            last = (published, now)
            return published
        }
        return published + min(4096, Int(rate * now.timeIntervalSince(last.time)))
    }
}
