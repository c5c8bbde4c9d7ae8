import BLECore
import Foundation

/// What the line reports while it runs (the live view and `--json` consume these).
public enum BatchEvent: Sendable, Equatable {
    /// The device is part of this run (`status` as the database had it).
    case enrolled(BatchTarget, status: DeviceStatus)
    case started(address: String, name: String?, adapter: String, attempt: Int)
    case progress(address: String, DeviceProgress)
    /// An attempt ended; `status` is final unless `retrying`.
    case finished(address: String, status: DeviceStatus, error: String?, retrying: Bool)
    /// `stop_after_failures` was reached: no new device starts.
    case lineStopped(failures: Int)
    /// Something the operator should read (a device taken over by another station, a failed heartbeat).
    case message(String)
}

/// How a run ended.
public struct BatchSummary: Sendable, Equatable {
    public var done = 0
    public var skipped = 0
    public var failed = 0
    /// Not finished: never started because the line stopped.
    public var pending = 0
    /// `stop_after_failures` was reached.
    public var lineStopped = false
    /// `shouldStop` asked the line to stop (Ctrl-C).
    public var interrupted = false
    /// Adapters (labels) that disappeared during the run; with none left the line stopped.
    public var adaptersGone: [String] = []
    public var statuses: [String: DeviceStatus] = [:]

    public init() {}

    public var total: Int { done + skipped + failed + pending }
}

/// Runs the line: every device on a free connection slot of some adapter (at most `connections` per adapter at
/// once), retries failed devices at the back of the queue, skips devices at the target version, and stops
/// starting devices after `stop_after_failures` devices failed for good. Devices never wait for each other: a
/// slot is the only thing they share.
///
/// An adapter that has no link for a device (its controller full: `no-free-link`, or busy: `adapter-busy`) is
/// back-pressure, not the device's failure: the device keeps its place and its retries, the adapter runs at most as
/// many links as it carried when it refused (until none of ours runs on it), and with none of ours on it, it rests
/// ``backPressureInterval`` before the next try.
///
/// The queue is the database's: each free slot claims the next device (``BatchLog/claimNext``), so several stations
/// on one shared database (a line) split the devices between them and take over the devices of a station whose
/// lease ran out. A station ends when no device of the batch is left pending or claimed.
public struct BatchScheduler: Sendable {
    public var plan: BatchPlan
    /// Package per class name.
    public var packages: [String: PackageInfo]
    public var flasher: any DeviceFlasher
    public var log: BatchLog
    /// The batch's name in the database (the CLI uses the plan's absolute path, or the line's name).
    public var batch: String
    /// This station (for one station alone: the host name).
    public var station: StationInfo
    /// Flash devices the database records at the target version too.
    public var force = false
    public var now: @Sendable () -> Date = { Date() }
    /// Waits between heartbeats and between looks for claimable devices (injected: tests never wait).
    public var clock: any Clock<Duration> = ContinuousClock()
    /// How often to look again for claimable devices while other stations hold the rest.
    public var pollInterval: Duration = .seconds(1)
    /// Whether a process of this host runs (a station of the same name whose process died is not live).
    public var isRunning: @Sendable (Int) -> Bool = { _ in true }
    /// Called after each heartbeat (the CLI copies the in-flight devices' journals into the store there).
    public var afterHeartbeat: @Sendable () async -> Void = {}
    /// Called when no heartbeat has succeeded for 0.6 of the lease: the station can no longer hold its
    /// claims, and another station will take its devices over soon. The CLI stops the station at once there (its
    /// `bledfu flash` children stop with it), so that no device is worked on by two stations.
    public var leaseLost: @Sendable (String) -> Void = { _ in }
    public var events: @Sendable (BatchEvent) -> Void = { _ in }
    /// Polled before each device starts: true stops the line (Ctrl-C); running devices finish.
    public var shouldStop: @Sendable () -> Bool = { false }
    /// How long an adapter that refused a link while none of this station's links ran on it rests before it is
    /// tried again (on ``clock``; back-pressure, docs/batch.md "Links per adapter").
    public var backPressureInterval: Duration = .seconds(1)
    /// Refusals in a row on an adapter with none of this station's links on it before the device's attempt counts as
    /// an ordinary failure (so that nothing waits forever on an adapter that never frees a link): with the default
    /// interval, about two minutes.
    public var backPressureLimit = 120

    public init(
        plan: BatchPlan, packages: [String: PackageInfo], flasher: any DeviceFlasher, log: BatchLog, batch: String,
        station: StationInfo? = nil
    ) {
        self.plan = plan
        self.packages = packages
        self.flasher = flasher
        self.log = log
        self.batch = batch
        self.station =
            station
            ?? StationInfo(
                name: "station", host: "localhost", pid: 0, adapters: BatchScheduler.adapterSummary(plan),
                planHash: PlanHash.of(packages), lease: 30)
    }

    /// `hci0×4, hci1×4`.
    public static func adapterSummary(_ plan: BatchPlan) -> String {
        plan.adapters.map { "\($0.label)×\($0.connections)" }.joined(separator: ", ")
    }

    struct Finished: Sendable {
        var record: DeviceRecord
        var adapterIndex: Int
        var attemptID: Int64
        var outcome: AttemptOutcome
        var retryable: Bool
        /// The adapter had no link for the device (not the device's failure).
        var backPressure: BackPressure? = nil
    }

    enum Step: Sendable {
        case finished(Finished)
        case heartbeat
        case look
        /// An adapter that rested after a refusal may be tried again.
        case resume(Int)
        case cancelled
    }

    /// Enrolls `targets`, then updates every device of the batch that is not final (the targets plus the devices
    /// earlier runs and other stations recorded) until none is left pending or claimed.
    public func run(targets: [BatchTarget]) async throws(BatchLogError) -> BatchSummary {
        let run = try await log.startRun(batch: batch, station: station, force: force, at: now(), isRunning: isRunning)
        let classes = plan.classes.map(\.name).filter { packages[$0] != nil }
        var seen = Set<String>()
        for target in targets {
            guard let package = packages[target.className], seen.insert(target.address.description).inserted else { continue }
            let record = try await log.enroll(
                batch: batch,
                device: DeviceRecord.Identity(
                    address: target.address.description, addressType: target.peer.type.rawValue, name: target.name,
                    className: target.className, packagePath: package.path, packageSHA256: package.sha256,
                    targetVersion: package.targetVersion),
                at: now())
            events(.enrolled(target, status: record.status))
        }
        let recorded = try await log.devices(batch: batch).filter { classes.contains($0.className) }
        for record in recorded {
            if !seen.contains(record.address), let target = record.target { events(.enrolled(target, status: record.status)) }
            if record.status.isFinal { events(.finished(address: record.address, status: record.status, error: nil, retrying: false)) }
        }
        var loop = Loop(scheduler: self, run: run, classes: classes, names: BootloaderNames.unique(for: recorded.compactMap(\.target?.address).sorted()))
        try await loop.run()
        var summary = BatchSummary()
        summary.lineStopped = loop.lineStopped
        summary.interrupted = loop.interrupted
        summary.adaptersGone = loop.adaptersGone
        for record in try await log.devices(batch: batch) where classes.contains(record.className) {
            summary.statuses[record.address] = record.status
            switch record.status {
            case .done: summary.done += 1
            case .skipped: summary.skipped += 1
            case .failed: summary.failed += 1
            case .pending, .running: summary.pending += 1
            }
        }
        let result = summary.interrupted ? "interrupted" : summary.lineStopped ? "stopped" : (summary.failed > 0 ? "failures" : "ok")
        try await log.finishRun(run, station: station.name, result: result, at: now())
        return summary
    }

    /// One attempt: probe, skip or flash, probe again for the version after. Cancelled (another station took the
    /// device over), it stops where it is: the flasher stops its work, and nothing is probed or flashed after.
    func attempt(_ job: FlashJob, record: DeviceRecord, slot: Int, attemptID: Int64) async -> Finished {
        let started = now()
        let address = job.target.address.description
        let events = self.events
        events(.progress(address: address, DeviceProgress(stage: "probing", total: job.package.totalBytes)))
        let before = await flasher.probe(job.target, adapter: job.adapter, options: job.options, afterUpdate: false)
        var outcome = AttemptOutcome(result: .failed, versionBefore: before.applicationVersion, name: before.name ?? job.target.name)
        if let pressure = before.backPressure {
            // The adapter had no link even for the probe: nothing reached the device.
            outcome.error = before.error ?? "the adapter has no free link"
            outcome.exitCode = before.exitCode
            return Finished(
                record: record, adapterIndex: slot, attemptID: attemptID, outcome: outcome, retryable: true,
                backPressure: pressure)
        }
        func finish(retryable: Bool = true, backPressure: BackPressure? = nil, takenOver: Bool = false) -> Finished {
            outcome.duration = max(0, now().timeIntervalSince(started))
            if takenOver {
                outcome.result = .interrupted
                outcome.error = "stopped: another station took this device over"
            }
            return Finished(
                record: record, adapterIndex: slot, attemptID: attemptID, outcome: outcome, retryable: retryable,
                backPressure: backPressure)
        }
        if plan.policies.skipAtTargetVersion, !force, before.mode == .application,
            let target = job.package.targetVersion, let installed = before.applicationVersion, installed >= target
        {
            outcome.result = .skipped
            outcome.versionAfter = installed
            outcome.error = "already at version \(installed) (target \(target))"
            return finish()
        }
        if before.mode == .unreachable, await !flasher.adapterPresent(job.adapter) {
            outcome.error = "adapter \(job.adapter.label) is gone (unplugged or removed): \(before.error ?? "no link")"
            return finish(backPressure: .adapterGone)
        }
        if Task.isCancelled { return finish(takenOver: true) }
        let result = await flasher.flash(job) { progress in events(.progress(address: address, progress)) }
        outcome.bytes = result.bytes
        outcome.resends = result.resends
        outcome.exitCode = result.exitCode
        // Cancelled: another station took the device over (the flasher stopped); the device is not probed again.
        if Task.isCancelled { return finish(takenOver: true) }
        guard result.success else {
            outcome.error = result.error ?? "the update failed"
            if result.interrupted { outcome.result = .interrupted }
            if !result.interrupted, result.backPressure == nil, await !flasher.adapterPresent(job.adapter) {
                // Not the device's failure: its journal lets the next adapter (or run) resume it.
                outcome.error = "adapter \(job.adapter.label) is gone (unplugged or removed) during the update: \(outcome.error ?? "")"
                return finish(backPressure: .adapterGone)
            }
            return finish(retryable: result.retryable, backPressure: result.backPressure)
        }
        events(.progress(address: address, DeviceProgress(stage: "verifying", bytes: job.package.totalBytes, total: job.package.totalBytes)))
        let after = await probeAfterUpdate(job)
        outcome.versionAfter = after.applicationVersion
        if after.mode == .bootloader, job.package.targetVersion != nil {
            outcome.error = "after the update the device stays in its bootloader (the new application does not start)"
            return finish()
        }
        if let target = job.package.targetVersion, let installed = after.applicationVersion, installed < target {
            outcome.error = "after the update the device reports version \(installed), not \(target)"
            return finish()
        }
        outcome.result = .done
        return finish()
    }
}

extension BatchScheduler {
    /// The probe after an update. A link the adapter's controller could not give at that moment (back-pressure:
    /// its other links are busy) says nothing about the device: the probe is tried again after
    /// ``backPressureInterval`` on ``clock``, at most ``backPressureLimit`` times, so the record gets the version
    /// the device now runs.
    func probeAfterUpdate(_ job: FlashJob) async -> DeviceProbe {
        var after = await flasher.probe(job.target, adapter: job.adapter, options: job.options, afterUpdate: true)
        var refusals = 0
        while after.backPressure != nil, refusals < backPressureLimit, !Task.isCancelled {
            refusals += 1
            do {
                try await clock.sleep(for: backPressureInterval)
            } catch {
                break  // cancelled: the device was taken over; its record is not this station's to finish
            }
            after = await flasher.probe(job.target, adapter: job.adapter, options: job.options, afterUpdate: true)
        }
        return after
    }
}
