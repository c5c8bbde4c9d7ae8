import BLECore
import DFUCore
import DFUPackage
import DFUProtocol
import Batch
import Foundation
import GATT
import LinuxIO
import LegacyDFU
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
struct ProcessFlasher: DeviceFlasher {
    /// The `bledfu` executable the children run.
    var executable: URL
    /// Journals (`--state-dir` of `bledfu flash`).
    var stateDirectory: URL
    /// Each device's standard error goes to `<logDirectory>/<address>.log`.
    var logDirectory: URL

    func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async -> DeviceProbe {
        // After an update the device resets into its application; give it a few tries to come back.
        let tries = afterUpdate ? 8 : 1
        var last = DeviceProbe(mode: .unreachable, error: "not tried")
        for attempt in 0..<tries {
            if attempt > 0 { await pause(seconds: 0.25 * Double(min(attempt, 4))) }
            last = await probeOnce(target, adapter: adapter, options: options)
            if !afterUpdate || last.mode == .application { return last }
        }
        return last
    }

    private func probeOnce(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions) async -> DeviceProbe {
        let radio: any BLEAdapter
        do {
            radio = try makeFlashAdapter(adapter.name)
        } catch {
            return DeviceProbe(mode: .unreachable, error: "\(error)")
        }
        let connection: OpenConnection
        do {
            (connection, _) = try await connectATT(
                adapter: radio, peer: target.peer, options: ConnectOptions(timeout: .milliseconds(Int64(options.timeout * 1000))),
                capturePath: nil, capture: nil, verbose: false)
        } catch {
            // The adapter had no link for the probe: back-pressure (the line tries the device again when one frees).
            let pressure: BackPressure? =
                error.exitCode == BledfuExit.noFreeLink ? .noFreeLink : error.exitCode == BledfuExit.adapterBusy ? .adapterBusy : nil
            var probe = DeviceProbe(mode: .unreachable, error: error.message, backPressure: pressure)
            probe.exitCode = error.exitCode
            return probe
        }
        // Closed before returning: the flash that follows needs the device's only link.
        let probe = await Self.inspect(connection.gatt)
        await connection.att.close()
        return probe
    }

    /// Mode, application version (Firmware Revision 0x2A26) and name (Device Name 0x2A00) of a connected device.
    static func inspect(_ gatt: GATTClient) async -> DeviceProbe {
        do {
            let services = try await gatt.discoverPrimaryServices()
            if let dfu = services.first(where: { $0.uuid == SecureDFUUUID.service }) {
                let uuids = Set(try await gatt.discoverCharacteristics(of: dfu).map(\.uuid))
                if uuids.contains(SecureDFUUUID.controlPoint) { return DeviceProbe(mode: .bootloader) }
            }
            if let legacy = services.first(where: { $0.uuid == LegacyDFUUUID.service }) {
                // A Legacy DFU bootloader: the DFU Version and the bootloader's services alone (legacy-dfu.md §8.4).
                let characteristics = try await gatt.discoverCharacteristics(of: legacy)
                var version: LegacyDFUVersion?
                if let characteristic = characteristics.first(where: { $0.uuid == LegacyDFUUUID.version }) {
                    version = try? LegacyDFUVersion(decoding: try await gatt.read(handle: characteristic.valueHandle))
                }
                let hasPacket = characteristics.contains { $0.uuid == LegacyDFUUUID.packet }
                if case .bootloader? = LegacyDetection.mode(services: services.map(\.uuid), version: version, hasPacket: hasPacket) {
                    return DeviceProbe(mode: .bootloader)
                }
            }
            var version: UInt32?
            if let information = services.first(where: { $0.uuid == BluetoothUUID(0x180A) }),
                let revision = try await gatt.discoverCharacteristics(of: information).first(where: { $0.uuid == BluetoothUUID(0x2A26) })
            {
                let text = String(decoding: try await gatt.read(handle: revision.valueHandle), as: UTF8.self)
                version = UInt32(text.trimmingCharacters(in: .whitespaces.union(CharacterSet(charactersIn: "\0"))))
            }
            var name: String?
            if let access = services.first(where: { $0.uuid == BluetoothUUID(0x1800) }),
                let deviceName = try await gatt.discoverCharacteristics(of: access).first(where: { $0.uuid == BluetoothUUID(0x2A00) })
            {
                name = String(decoding: try await gatt.read(handle: deviceName.valueHandle), as: UTF8.self)
            }
            return DeviceProbe(mode: .application, applicationVersion: version, name: name)
        } catch {
            return DeviceProbe(mode: .unreachable, error: "\(error)")
        }
    }

    /// `bledfu flash` arguments for one job.
    func arguments(_ job: FlashJob) -> [String] {
        var arguments = [
            "flash", job.package.path, "--device", job.target.address.description, "--address-type", job.target.peer.type.rawValue,
            "--adapter", job.adapter.name, "--json", "--state-dir", stateDirectory.path, "--mode", job.options.mode,
            "--scan-timeout", "\(job.options.scanTimeout)", "--reboot-delay", "\(job.options.rebootDelay)",
            "--reconnect-attempts", "\(job.options.reconnectAttempts)", "--timeout", "\(job.options.timeout)",
        ]
        for key in job.options.keys { arguments += ["--key", key] }
        if let name = job.bootloaderName { arguments += ["--bootloader-name", name] }
        if let uuid = job.options.serviceUUID { arguments += ["--service-uuid", uuid] }
        return arguments
    }

    func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments(job)
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        let logURL = logDirectory.appendingPathComponent(job.target.address.description.replacingOccurrences(of: ":", with: "-") + ".log")
        try? FileManager.default.createDirectory(at: logDirectory, withIntermediateDirectories: true)
        if !FileManager.default.fileExists(atPath: logURL.path) { _ = FileManager.default.createFile(atPath: logURL.path, contents: nil) }
        let log = FileHandle(forWritingAtPath: logURL.path)
        log?.seekToEndOfFile()
        log?.write(Data("--- attempt \(job.attempt): bledfu \(process.arguments?.joined(separator: " ") ?? "")\n".utf8))
        process.standardError = log ?? FileHandle.nullDevice
        let exited = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { exited.continuation.yield($0.terminationStatus) }
        do {
            try process.run()
        } catch {
            return FlashOutcome(success: false, error: "cannot start \(executable.path): \(error)", retryable: false)
        }
        let pid = process.processIdentifier
        let stallLimit = job.options.effectiveStallTimeout
        let watchdog = StallWatchdog(limit: .milliseconds(Int64(stallLimit * 1000)), clock: ContinuousClock()) {
            // The child ends (also a stopped one), its standard output reaches EOF and the waits below end.
            try? ProcessSignal.killNow(pid)  // ESRCH is success; nothing else can fail for our own child
        }
        let started = ContinuousClock.now
        let parser = FlashEventParser(total: job.package.totalBytes, progress: progress) { line in
            // Everything but the progress events goes to the device's log too, with the time since the start.
            let elapsed = started.duration(to: .now)
            let stamp = String(format: "%8.3f ", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            log?.write(Data(stamp.utf8) + line + Data("\n".utf8))
        }
        let reader = output.fileHandleForReading
        let lines = AsyncStream<Void>.makeStream()
        let thread = Thread {
            // Blocking reads on a thread of its own: a child that stops writing never holds up the others.
            var buffer = Data()
            while true {
                // A read error other than EINTR ends the stream like end of file; the exit status still decides.
                let chunk = (try? BlockingRead.chunk(fd: reader.fileDescriptor)) ?? []
                if chunk.isEmpty { break }
                watchdog.touch()
                buffer.append(contentsOf: chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    parser.consume(buffer[buffer.startIndex..<newline])
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
            }
            lines.continuation.finish()
        }
        thread.start()
        for await _ in lines.stream {}
        var status: Int32 = -1
        for await code in exited.stream {
            status = code
            break
        }
        let stalled = watchdog.stop()
        // The log is diagnostics only: a failed close loses nothing the database needs.
        if stalled {
            log?.write(Data("--- killed: no event for \(Int(stallLimit)) s\n".utf8))
        }
        try? log?.close()
        if stalled {
            return FlashOutcome(
                success: false,
                error: "bledfu flash stopped answering (no event for \(Int(stallLimit)) s) and was killed "
                    + "[exit \(BatchExit.flashStalled)]",
                exitCode: BatchExit.flashStalled, retryable: true)
        }
        return parser.outcome(exitStatus: status, logPath: logURL.path)
    }
}

/// Turns `bledfu flash --json` events into progress and an outcome.
final class FlashEventParser: Sendable {
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

    init(total: Int, progress: @escaping @Sendable (DeviceProgress) -> Void, record: @escaping @Sendable (Data) -> Void = { _ in }) {
        self.total = total
        self.progress = progress
        self.record = record
    }

    func consume(_ line: Data) {
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

    func outcome(exitStatus: Int32, logPath: String) -> FlashOutcome {
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

/// Waits `seconds` on the wall clock (the line's pause between probes of a device that is resetting).
func pause(seconds: Double) async {
    guard seconds > 0 else { return }
    try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
}
