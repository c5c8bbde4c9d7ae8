import BLECore
import DFUCore
import DFUPackage
import BledfuKit
import Foundation
import LinuxIO
import Synchronization

/// The line's per-device flash (issue #6): each device runs the whole `bledfu flash` (buttonless jump, multi-part,
/// reconnect and resume, journal) in a child process of its own, with `--json` events on a pipe.
///
/// A child of its own keeps devices apart: one device's crash, hang or noisy output cannot touch another, and the
/// flash's console output (written for one device) stays out of the live view. When the batch process dies (kill
/// -9), each child dies at its next event (EPIPE on its standard output); its journal lets the next run resume.
/// A child that prints nothing for the plan's `flash.stall_timeout` (a hung child, a stopped one, a device that holds
/// it in a call the flash does not bound) is killed (SIGKILL) and the attempt fails with exit code 59; the journal
/// again lets a retry resume.
public struct ProcessFlasher: DeviceFlasher {
    /// The `bledfu` executable the children run.
    public var executable: URL
    /// Journals (`--state-dir` of `bledfu flash`).
    public var stateDirectory: URL
    /// Each device's standard error goes to `<logDirectory>/<address>.log`.
    public var logDirectory: URL
    /// The adapter a probe uses, by its plan name (`hci0`, `virtual:DIR`): the transports are the caller's.
    public var makeAdapter: @Sendable (String) throws -> any BLEAdapter
    /// The running children (Ctrl-C reaches them through it: ProcessFlasher+Child.swift).
    public var children = FlashChildren()

    public init(
        executable: URL, stateDirectory: URL, logDirectory: URL,
        makeAdapter: @escaping @Sendable (String) throws -> any BLEAdapter
    ) {
        self.executable = executable
        self.stateDirectory = stateDirectory
        self.logDirectory = logDirectory
        self.makeAdapter = makeAdapter
    }

    public func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async -> DeviceProbe {
        let radio: any BLEAdapter
        do {
            radio = try makeAdapter(adapter.name)
        } catch {
            return DeviceProbe(mode: .unreachable, error: "\(error)")
        }
        // The library's inspection (the families' `detect`, on the clock): after an update the device reboots into
        // its application, so it waits up to the scan timeout for it to advertise at its address; before one, a
        // device not at its address is looked for where its bootloader would be too (an earlier update cut off).
        let timeout = Self.duration(options.timeout)
        let request = InspectionRequest(
            target: .address(target.peer), options: UpdateOptions(responseTimeout: timeout),
            scanTimeout: afterUpdate ? Self.duration(options.scanTimeout) : timeout, connectTimeout: timeout,
            applicationOnly: afterUpdate)
        do {
            // Closed before returning: the flash that follows needs the device's only link.
            return Self.probe(try await Updater(adapter: radio, clock: ContinuousClock()).inspect(request))
        } catch {
            // The adapter had no link for the probe: back-pressure (the line tries the device again when one frees).
            let code = FlashExit.code(for: error)
            let pressure: BackPressure? =
                code == BledfuExit.noFreeLink ? .noFreeLink : code == BledfuExit.adapterBusy ? .adapterBusy : nil
            var probe = DeviceProbe(mode: .unreachable, error: error.message, backPressure: pressure)
            probe.exitCode = code
            return probe
        }
    }

    /// A plan's seconds as a duration (to the millisecond).
    static func duration(_ seconds: Double) -> Duration { .milliseconds(Int64((seconds * 1000).rounded())) }

    /// The line's view of an inspection: a bootloader, or the application with its version (the Firmware Revision
    /// 0x2A26 as a decimal number) and name (Device Name 0x2A00).
    static func probe(_ inspection: DeviceInspection) -> DeviceProbe {
        if !inspection.runsApplication { return DeviceProbe(mode: .bootloader) }
        let revision = inspection.information.firmwareRevision?.trimmingCharacters(in: .whitespaces)
        return DeviceProbe(
            mode: .application, applicationVersion: revision.flatMap { UInt32($0) }, name: inspection.information.name)
    }

    /// The child's own watchdog (`flash --stall-timeout`, seconds): 30 s below the line's `flash.stall_timeout`, at
    /// least 30 (the flag's minimum). A stalled child then cancels its update, closes its link and ends with exit 49
    /// (`stalled`, resumable) before the line kills it (exit 59, SIGKILL) at the line's limit; with the child's
    /// default (120 s) and the line's default (120 s) the line killed first. Below 40 s the line may still kill first.
    static func childStallTimeout(_ lineLimit: Double) -> Int { max(30, Int(lineLimit.rounded(.down)) - 30) }

    /// `bledfu flash` arguments for one job.
    func arguments(_ job: FlashJob) -> [String] {
        var arguments = [
            "flash", job.package.path, "--device", job.target.address.description, "--address-type", job.target.peer.type.rawValue,
            "--adapter", job.adapter.name, "--json", "--state-dir", stateDirectory.path, "--mode", job.options.mode,
            "--scan-timeout", "\(job.options.scanTimeout)", "--reboot-delay", "\(job.options.rebootDelay)",
            "--reconnect-attempts", "\(job.options.reconnectAttempts)", "--timeout", "\(job.options.timeout)",
        ]
        arguments += ["--stall-timeout", "\(Self.childStallTimeout(job.options.effectiveStallTimeout))"]
        for key in job.options.keys { arguments += ["--key", key] }
        if let name = job.bootloaderName { arguments += ["--bootloader-name", name] }
        if let uuid = job.options.serviceUUID { arguments += ["--service-uuid", uuid] }
        return arguments
    }
}

/// Turns `bledfu flash --json` events into progress and an outcome.
public final class FlashEventParser: Sendable {
    struct State {
        var stage = "starting"
        var part = 1
        var parts = 1
        /// The `result` event: success, exit code, bytes sent and resent, message.
        var result: UpdateSummary?
        var lastError: String?
    }

    let total: Int
    let progress: @Sendable (DeviceProgress) -> Void
    private let state = Mutex(State())

    /// Receives every line that is not a progress event.
    let record: @Sendable (Data) -> Void

    public init(total: Int, progress: @escaping @Sendable (DeviceProgress) -> Void, record: @escaping @Sendable (Data) -> Void = { _ in }) {
        self.total = total
        self.progress = progress
        self.record = record
    }

    public func consume(_ line: Data) {
        guard let decoded = try? JSONDecoder().decode(UpdateEventRecord.self, from: line) else {
            record(line)
            return
        }
        let event = decoded.event
        if case .progress = event {} else { record(line) }
        let update: DeviceProgress? = state.withLock { box in
            switch event {
            case .progress(let p):
                box.stage = "uploading"
                box.part = p.part
                box.parts = p.parts
                return DeviceProgress(stage: "uploading", bytes: p.bytes, total: p.total, part: p.part, parts: p.parts)
            case .warning(let message):
                box.lastError = message
                return nil
            case .result(let summary):
                box.result = summary
                return nil
            case .uploading(let part, let parts, _, _):
                box.part = part
                box.parts = parts
                box.stage = "uploading"
                return DeviceProgress(stage: "uploading", total: total, part: part, parts: parts)
            default:
                guard let name = event.stateName else { return nil }
                box.stage = name
                return DeviceProgress(stage: name, total: total, part: box.part, parts: box.parts)
            }
        }
        if let update { progress(update) }
    }

    public func outcome(exitStatus: Int32, logPath: String) -> FlashOutcome {
        state.withLock { box in
            let result = box.result
            let bytes = result?.bytesSent ?? 0
            let resent = result?.bytesResent ?? 0
            if exitStatus == 0, result?.success != false {
                return FlashOutcome(success: true, exitCode: 0, bytes: bytes, resends: resent)
            }
            let code = result?.exitCode.map { Int32(clamping: $0) } ?? exitStatus
            let message = result?.message ?? box.lastError ?? "bledfu flash exited with \(exitStatus) (see \(logPath))"
            // A package the device or the flash rejects as such fails the same way every time.
            let permanent = !ExitCodeRegistry.retryMayHelp(code)
            var outcome = FlashOutcome(
                success: false, error: "\(message) [exit \(code)]", exitCode: code, bytes: bytes, resends: resent, retryable: !permanent)
            outcome.interrupted = code == BledfuExit.interrupted
            // The adapter had no link for the device: back-pressure, the line tries it again when a link frees.
            if code == BledfuExit.noFreeLink { outcome.backPressure = .noFreeLink }
            if code == BledfuExit.adapterBusy { outcome.backPressure = .adapterBusy }
            return outcome
        }
    }
}

/// Waits `seconds` on the wall clock.
public func pause(seconds: Double) async {
    guard seconds > 0 else { return }
    try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
}
