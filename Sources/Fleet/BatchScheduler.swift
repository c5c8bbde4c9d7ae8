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
    public var statuses: [String: DeviceStatus] = [:]

    public init() {}

    public var total: Int { done + skipped + failed + pending }
}

/// Runs the line: every device on a free connection slot of some adapter (at most `connections` per adapter at
/// once), retries failed devices at the back of the queue, skips devices at the target version, and stops
/// starting devices after `stop_after_failures` devices failed for good. Devices never wait for each other: a
/// slot is the only thing they share.
public struct BatchScheduler: Sendable {
    public var plan: BatchPlan
    /// Package per class name.
    public var packages: [String: PackageInfo]
    public var flasher: any DeviceFlasher
    public var log: BatchLog
    /// The batch's name in the database (the CLI uses the plan's absolute path).
    public var batch: String
    /// Flash devices the database records at the target version too.
    public var force = false
    public var now: @Sendable () -> Date = { Date() }
    public var events: @Sendable (BatchEvent) -> Void = { _ in }
    /// Polled before each device starts: true stops the line (Ctrl-C); running devices finish.
    public var shouldStop: @Sendable () -> Bool = { false }

    public init(plan: BatchPlan, packages: [String: PackageInfo], flasher: any DeviceFlasher, log: BatchLog, batch: String) {
        self.plan = plan
        self.packages = packages
        self.flasher = flasher
        self.log = log
        self.batch = batch
    }

    struct Queued: Sendable {
        var target: BatchTarget
        var package: PackageInfo
        /// Attempts made in this run.
        var tries: Int
    }

    struct Finished: Sendable {
        var queued: Queued
        var adapterIndex: Int
        var attemptID: Int64
        var outcome: AttemptOutcome
        var retryable: Bool
    }

    /// Runs `targets` plus the devices earlier runs of this batch recorded (unfinished ones are finished, finished
    /// ones are reported again without a connection).
    public func run(targets: [BatchTarget]) async throws(BatchLogError) -> BatchSummary {
        let run = try log.startRun(batch: batch, force: force, at: now())
        var all = targets
        let known = Set(targets.map(\.address.description))
        // Devices of this batch from earlier runs: unfinished ones are taken up again (a device left in its
        // bootloader may match no discovery rule), finished ones are reported as they are.
        for record in try log.devices(batch: batch) where !known.contains(record.address) {
            guard let address = BluetoothAddress(record.address), plan.deviceClass(named: record.className) != nil else { continue }
            all.append(
                BatchTarget(
                    peer: PeerAddress(address, type: AddressType(rawValue: record.addressType) ?? .random), name: record.name,
                    className: record.className))
        }

        var summary = BatchSummary()
        var queue: [Queued] = []
        for target in all {
            guard let package = packages[target.className] else { continue }
            let address = target.address.description
            let record = try log.enroll(
                batch: batch,
                device: DeviceRecord.Identity(
                    address: address, addressType: target.peer.type.rawValue, name: target.name, className: target.className,
                    packagePath: package.path, packageSHA256: package.sha256, targetVersion: package.targetVersion),
                at: now())
            events(.enrolled(target, status: record.status))
            if !force, let earlier = try log.completed(address: address, packageSHA256: package.sha256, targetVersion: package.targetVersion) {
                let status: DeviceStatus = earlier.batch == batch ? earlier.status : .skipped
                if earlier.batch != batch || earlier.status != record.status {
                    try log.markSkipped(
                        batch: batch, address: address, reason: "recorded at the target version in batch \(earlier.batch)",
                        versionAfter: earlier.versionAfter, at: now())
                }
                summary.statuses[address] = status
                events(.finished(address: address, status: status, error: nil, retrying: false))
                continue
            }
            queue.append(Queued(target: target, package: package, tries: 0))
        }
        let names = BootloaderNames.unique(for: queue.map(\.target.address))

        var free = plan.adapters.map(\.connections)
        var failures = 0
        var stopped = false
        var logError: BatchLogError?
        await withTaskGroup(of: Finished.self) { group in
            var running = 0
            while true {
                if !stopped, shouldStop() {
                    stopped = true
                    summary.interrupted = true
                }
                while !stopped, !queue.isEmpty, let slot = free.indices.max(by: { free[$0] < free[$1] }), free[slot] > 0 {
                    var next = queue.removeFirst()
                    next.tries += 1
                    free[slot] -= 1
                    running += 1
                    let adapter = plan.adapters[slot]
                    let address = next.target.address.description
                    let attemptID: Int64
                    let attemptNumber: Int
                    do {
                        (attemptID, attemptNumber) = try log.beginAttempt(run: run, batch: batch, address: address, adapter: adapter.label, at: now())
                    } catch {
                        logError = error as? BatchLogError ?? BatchLogError(.write, "\(error)")
                        stopped = true
                        free[slot] += 1
                        running -= 1
                        break
                    }
                    events(.started(address: address, name: next.target.name, adapter: adapter.label, attempt: attemptNumber))
                    let job = FlashJob(
                        target: next.target, package: next.package, adapter: adapter, attempt: attemptNumber,
                        bootloaderName: plan.flash.uniqueBootloaderNames ? names[next.target.address] : nil, options: plan.flash)
                    let queued = next
                    group.addTask { await attempt(job, queued: queued, slot: slot, attemptID: attemptID) }
                }
                guard running > 0, let finished = await group.next() else { break }
                running -= 1
                free[finished.adapterIndex] += 1
                let address = finished.queued.target.address.description
                let outcome = finished.outcome
                let final: DeviceStatus?
                var requeued = false
                switch outcome.result {
                case .done: final = .done
                case .skipped: final = .skipped
                case .interrupted, .running: final = nil
                case .failed:
                    let canRetry = finished.retryable && finished.queued.tries <= plan.policies.retries && !stopped
                    final = canRetry ? nil : .failed
                    if canRetry {
                        queue.append(finished.queued)
                        requeued = true
                    }
                }
                do {
                    try log.endAttempt(finished.attemptID, batch: batch, address: address, outcome: outcome, final: final, at: now())
                } catch {
                    logError = error as? BatchLogError ?? BatchLogError(.write, "\(error)")
                    stopped = true
                }
                summary.statuses[address] = final ?? .pending
                events(.finished(address: address, status: final ?? .pending, error: outcome.error, retrying: requeued))
                if final == .failed {
                    failures += 1
                    if let limit = plan.policies.stopAfterFailures, failures >= limit, !summary.lineStopped {
                        stopped = true
                        summary.lineStopped = true
                        events(.lineStopped(failures: failures))
                    }
                }
            }
        }
        if let logError { throw logError }
        for queued in queue { summary.statuses[queued.target.address.description] = .pending }
        for status in summary.statuses.values {
            switch status {
            case .done: summary.done += 1
            case .skipped: summary.skipped += 1
            case .failed: summary.failed += 1
            case .pending, .running: summary.pending += 1
            }
        }
        try log.finishRun(run, result: summary.interrupted ? "interrupted" : summary.lineStopped ? "stopped" : (summary.failed > 0 ? "failures" : "ok"), at: now())
        return summary
    }

    /// One attempt: probe, skip or flash, probe again for the version after.
    func attempt(_ job: FlashJob, queued: Queued, slot: Int, attemptID: Int64) async -> Finished {
        let started = now()
        let address = job.target.address.description
        let events = self.events
        events(.progress(address: address, DeviceProgress(stage: "probing", total: job.package.totalBytes)))
        let before = await flasher.probe(job.target, adapter: job.adapter, options: job.options, afterUpdate: false)
        var outcome = AttemptOutcome(result: .failed, versionBefore: before.applicationVersion, name: before.name ?? job.target.name)
        func finish(retryable: Bool = true) -> Finished {
            outcome.duration = max(0, now().timeIntervalSince(started))
            return Finished(queued: queued, adapterIndex: slot, attemptID: attemptID, outcome: outcome, retryable: retryable)
        }
        if plan.policies.skipAtTargetVersion, !force, before.mode == .application,
            let target = job.package.targetVersion, let installed = before.applicationVersion, installed >= target
        {
            outcome.result = .skipped
            outcome.versionAfter = installed
            outcome.error = "already at version \(installed) (target \(target))"
            return finish()
        }
        let result = await flasher.flash(job) { progress in events(.progress(address: address, progress)) }
        outcome.bytes = result.bytes
        outcome.resends = result.resends
        outcome.exitCode = result.exitCode
        guard result.success else {
            outcome.error = result.error ?? "the update failed"
            if result.interrupted { outcome.result = .interrupted }
            return finish(retryable: result.retryable)
        }
        events(.progress(address: address, DeviceProgress(stage: "verifying", bytes: job.package.totalBytes, total: job.package.totalBytes)))
        let after = await flasher.probe(job.target, adapter: job.adapter, options: job.options, afterUpdate: true)
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
