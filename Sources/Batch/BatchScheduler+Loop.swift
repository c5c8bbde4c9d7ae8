import BLECore
import Foundation
import Synchronization

extension DeviceRecord {
    /// The device as the scheduler hands it to a flasher (nil when the record's address is not one).
    public var target: BatchTarget? {
        guard let peer = BluetoothAddress(address) else { return nil }
        return BatchTarget(peer: PeerAddress(peer, type: AddressType(rawValue: addressType) ?? .random), name: name, className: className)
    }
}

extension BatchScheduler {
    /// One station's run: fills free slots with claimed devices, renews its leases on a heartbeat, looks again for
    /// claimable devices while other stations hold the rest, and records every attempt.
    struct Loop {
        let scheduler: BatchScheduler
        let run: Int64
        let classes: [String]
        var names: [BluetoothAddress: String]
        var lineStopped = false
        var interrupted = false
        /// Labels of the adapters that disappeared.
        var adaptersGone: [String] = []
        /// Per adapter: gone (no device starts on it again in this run).
        private var gone: [Bool]
        private var free: [Int]
        /// Per adapter: links of ours it may carry now (its connections, lowered by a no-free-link refusal).
        private var cap: [Int]
        /// Per adapter: resting after a refusal with none of our links on it (until a ``Step/resume(_:)``).
        private var resting: [Bool]
        /// Per adapter: refusals in a row with none of our links on it.
        private var refusals: [Int]
        private var running = 0
        private var failures = 0
        private var stopped = false
        private var logError: BatchLogError?
        /// When the heartbeat last succeeded (the run's start counts as one).
        private let lastBeat: BeatTracker
        /// The latest progress of each device this station runs (the heartbeat stores it).
        private let progress: ProgressTable
        /// The running attempts by address: a device another station took over has its attempt cancelled.
        private let attempts = AttemptTasks()

        init(scheduler: BatchScheduler, run: Int64, classes: [String], names: [BluetoothAddress: String]) {
            // Progress and finished events also keep the table of in-flight progress the heartbeat stores.
            let progress = ProgressTable()
            let events = scheduler.events
            var instrumented = scheduler
            instrumented.events = { event in
                switch event {
                case .progress(let address, let value): progress.table.withLock { $0[address] = value }
                case .finished(let address, _, _, _): _ = progress.table.withLock { $0.removeValue(forKey: address) }
                default: break
                }
                events(event)
            }
            self.progress = progress
            self.scheduler = instrumented
            self.run = run
            self.classes = classes
            self.names = names
            free = scheduler.plan.adapters.map(\.connections)
            cap = free
            resting = free.map { _ in false }
            gone = free.map { _ in false }
            refusals = free.map { _ in 0 }
            lastBeat = BeatTracker(scheduler.now())
        }

        var plan: BatchPlan { scheduler.plan }
        var log: BatchLog { scheduler.log }
        var station: StationInfo { scheduler.station }

        mutating func run() async throws(BatchLogError) {
            let worker = scheduler
            let watchdog = Self.watchdog(worker, lastBeat)
            defer { watchdog.cancel() }
            await withTaskGroup(of: Step.self) { group in
                group.addTask { await Self.wait(worker.clock, Self.heartbeatInterval(worker.station), .heartbeat) }
                var looking = false
                while true {
                    if !stopped, scheduler.shouldStop() {
                        stopped = true
                        interrupted = true
                    }
                    let exhausted = await fillSlots(group: &group, worker: worker)
                    if running == 0, stopped || logError != nil { break }
                    // Nothing runs and nothing was left to claim: ask whether anything remains, also while a look
                    // for more is pending (the look would end the batch only after `pollInterval`: a batch whose
                    // devices finished at different times ended up to a second late: 0.87 s of a 5.1 s six-bracelet run).
                    if running == 0, exhausted {
                        let remaining: Int
                        do {
                            remaining = try await log.remaining(batch: scheduler.batch, classes: classes)
                        } catch {
                            logError = error as? BatchLogError ?? BatchLogError(.read, "\(error)")
                            break
                        }
                        if remaining == 0 { break }
                    }
                    if exhausted, !looking, !stopped, free.indices.contains(where: { available($0) > 0 }) {
                        looking = true
                        group.addTask { await Self.wait(worker.clock, worker.pollInterval, .look) }
                    }
                    guard let step = await group.next() else { break }
                    switch step {
                    case .finished(let finished):
                        if let rest = await record(finished) {
                            group.addTask { await Self.wait(worker.clock, worker.backPressureInterval, .resume(rest)) }
                        }
                    case .resume(let slot): resting[slot] = false
                    case .look: looking = false
                    case .cancelled: break
                    case .heartbeat:
                        await beat()
                        group.addTask { await Self.wait(worker.clock, Self.heartbeatInterval(worker.station), .heartbeat) }
                    }
                }
                group.cancelAll()
            }
            if let logError { throw logError }
        }

        static func heartbeatInterval(_ station: StationInfo) -> Duration { .milliseconds(Int64(max(0.05, station.lease / 3) * 1000)) }

        static func wait(_ clock: any Clock<Duration>, _ duration: Duration, _ step: Step) async -> Step {
            do {
                try await clock.sleep(for: duration)
                return step
            } catch {
                return .cancelled
            }
        }

        /// The links adapter `slot` may start now: its free slots, within what its controller carries, none while it rests.
        func available(_ slot: Int) -> Int {
            guard !resting[slot], !gone[slot] else { return 0 }
            let ours = plan.adapters[slot].connections - free[slot]
            return max(0, min(free[slot], cap[slot] - ours))
        }

        /// Claims devices for the free slots; true when the database had no claimable device left.
        mutating func fillSlots(group: inout TaskGroup<Step>, worker: BatchScheduler) async -> Bool {
            while !stopped, logError == nil, let slot = free.indices.max(by: { available($0) < available($1) }),
                available(slot) > 0
            {
                let record: DeviceRecord
                do {
                    guard let claimed = try await log.claimNext(batch: scheduler.batch, station: station.name, classes: classes, lease: station.lease, at: scheduler.now())
                    else { return true }
                    record = claimed
                    if try await skipIfCompletedElsewhere(record) { continue }
                } catch {
                    logError = error
                    stopped = true
                    return false
                }
                guard let package = scheduler.packages[record.className], let target = record.target else {
                    do {
                        try await log.markSkipped(
                            batch: scheduler.batch, address: record.address, reason: "not a Bluetooth address or class", versionAfter: nil,
                            at: scheduler.now())
                    } catch {
                        logError = error
                        return false
                    }
                    continue
                }
                let adapter = plan.adapters[slot]
                let attemptID: Int64
                let attemptNumber: Int
                do {
                    (attemptID, attemptNumber) = try await log.beginAttempt(
                        run: run, batch: scheduler.batch, address: record.address, adapter: adapter.label, station: station.name, at: scheduler.now())
                } catch where error.code == .claimLost {
                    // Paused past the lease between the claim and now: the device is another station's.
                    scheduler.events(.message("\(record.address): another station took this device over before it started here"))
                    continue
                } catch {
                    logError = error
                    stopped = true
                    return false
                }
                free[slot] -= 1
                running += 1
                var claimed = record
                claimed.attempts = attemptNumber
                if names[target.address] == nil { names = BootloaderNames.unique(for: (Array(names.keys) + [target.address]).sorted()) }
                scheduler.events(.started(address: record.address, name: record.name, adapter: adapter.label, attempt: attemptNumber))
                let job = FlashJob(
                    target: target, package: package, adapter: adapter, attempt: attemptNumber,
                    bootloaderName: plan.flash.uniqueBootloaderNames ? names[target.address] : nil, options: plan.flash)
                // An unstructured task of its own, so that a device taken over by another station can be cancelled alone.
                let task = Task { await worker.attempt(job, record: claimed, slot: slot, attemptID: attemptID) }
                let registry = attempts
                registry.add(record.address, task)
                group.addTask {
                    let finished = await task.value
                    registry.remove(finished.record.address)
                    return .finished(finished)
                }
            }
            return false
        }

        /// A claimed device that the database records at the target version in another batch is skipped here.
        func skipIfCompletedElsewhere(_ record: DeviceRecord) async throws(BatchLogError) -> Bool {
            guard !scheduler.force, let package = scheduler.packages[record.className],
                let earlier = try await log.completed(address: record.address, packageSHA256: package.sha256, targetVersion: package.targetVersion),
                earlier.batch != scheduler.batch
            else { return false }
            try await log.markSkipped(
                batch: scheduler.batch, address: record.address, reason: "recorded at the target version in batch \(earlier.batch)",
                versionAfter: earlier.versionAfter, at: scheduler.now())
            scheduler.events(.finished(address: record.address, status: .skipped, error: nil, retrying: false))
            return true
        }

        /// Back-pressure (docs/batch.md "Links per adapter"): whether this attempt's refusal keeps the device's place,
        /// and the adapter to rest (nil: it may go on). A no-free-link refusal while our other links run on the adapter
        /// lowers its cap to them: the device is tried again when one of them ends. Otherwise the adapter rests.
        mutating func pressure(_ finished: Finished) -> (keepPlace: Bool, rest: Int?) {
            let slot = finished.adapterIndex
            if finished.backPressure == .adapterGone {
                // Not the device's failure: it keeps its place (and its journal) for another adapter or the next run.
                adapterGone(slot)
                return (true, nil)
            }
            let ours = plan.adapters[slot].connections - free[slot]
            guard let pressure = finished.backPressure, finished.outcome.result == .failed, !stopped,
                refusals[slot] < scheduler.backPressureLimit
            else {
                if finished.backPressure == nil {
                    refusals[slot] = 0
                    if ours == 0 { cap[slot] = plan.adapters[slot].connections }  // measure again
                }
                return (false, nil)
            }
            if pressure == .noFreeLink, ours > 0 {
                cap[slot] = min(cap[slot], ours)
                return (true, nil)
            }
            refusals[slot] += 1
            resting[slot] = true
            return (true, slot)
        }

        /// Takes a vanished adapter out of the run; with none left, the line stops (`batch` exit 60).
        mutating func adapterGone(_ slot: Int) {
            guard !gone[slot] else { return }
            gone[slot] = true
            let label = plan.adapters[slot].label
            adaptersGone.append(label)
            scheduler.events(.message("adapter \(label) is gone (unplugged or removed): no device starts on it again in this run"))
            if gone.allSatisfy({ $0 }) {
                stopped = true
                scheduler.events(.message("no adapter left: the line stops; the devices not done stay pending"))
            }
        }

        /// Records an attempt; returns the adapter that must rest before its next try (back-pressure).
        mutating func record(_ finished: Finished) async -> Int? {
            running -= 1
            free[finished.adapterIndex] += 1
            let address = finished.record.address
            let outcome = finished.outcome
            let (keepPlace, rest) = pressure(finished)
            let final: DeviceStatus?
            var requeued = false
            switch outcome.result {
            case .done: final = .done
            case .skipped: final = .skipped
            case .interrupted, .running: final = nil
            case .failed where keepPlace:
                final = nil
                requeued = true
            case .failed:
                // `tries` counts this round's attempts, this one included.
                let canRetry = finished.retryable && finished.record.tries + 1 <= plan.policies.retries && !stopped
                final = canRetry ? nil : .failed
                requeued = canRetry
            }
            do {
                try await log.endAttempt(
                    finished.attemptID, batch: scheduler.batch, address: address, outcome: outcome, final: final,
                    keepPlace: keepPlace, station: station.name, at: scheduler.now())
            } catch where error.code == .claimLost {
                // Another station took the device over while this station did not renew its lease (paused, or cut off
                // from the database): its record stands, this attempt's result is dropped.
                scheduler.events(.message("\(address): not recorded here, another station took this device over (\(error.reason))"))
                scheduler.events(.finished(address: address, status: .running, error: "taken over by another station", retrying: false))
                return rest
            } catch {
                logError = error
                stopped = true
            }
            scheduler.events(.finished(address: address, status: final ?? .pending, error: outcome.error, retrying: requeued))
            if final == .failed {
                failures += 1
                if let limit = plan.policies.stopAfterFailures, failures >= limit, !lineStopped {
                    stopped = true
                    lineStopped = true
                    scheduler.events(.lineStopped(failures: failures))
                }
            }
            return rest
        }

        /// Renews the leases and stores the progress. A device another station took over is reported and its attempt is
        /// cancelled (the flasher stops its work on the device: `bledfu flash` children are killed). When no renewal has
        /// succeeded for 0.6 of the lease, the station's claims are about to lapse: the ``watchdog`` calls ``leaseLost``.
        func beat() async {
            let snapshot = progress.table.withLock { $0 }
            let now = scheduler.now()
            do {
                let lost = try await log.heartbeat(batch: scheduler.batch, station: station.name, lease: station.lease, progress: snapshot, at: now)
                lastBeat.last.withLock { $0 = now }
                for address in lost.sorted() {
                    scheduler.events(.message("\(address): another station took this device over (this station's lease ran out); stopping its update here"))
                    attempts.cancel(address)
                }
            } catch {
                scheduler.events(.message("heartbeat failed: \(error.reason)"))
            }
            await scheduler.afterHeartbeat()
        }

        /// Watches the heartbeat from outside the loop (which may itself hang on a dead database connection): once no
        /// heartbeat has succeeded for 0.6 of the lease, the claims are about to lapse and ``leaseLost`` is called.
        /// Looks every quarter of the lease, so it fires before the lease runs out.
        static func watchdog(_ scheduler: BatchScheduler, _ lastBeat: BeatTracker) -> Task<Void, Never> {
            let lease = scheduler.station.lease
            return Task {
                var told = false
                while true {
                    do {
                        try await scheduler.clock.sleep(for: .milliseconds(Int64(lease * 250)))
                    } catch {
                        return
                    }
                    let silent = scheduler.now().timeIntervalSince(lastBeat.last.withLock { $0 })
                    if silent >= lease * 0.6, !told {
                        told = true
                        scheduler.leaseLost(
                            "the line database has not taken a heartbeat for \(Int(silent)) s (lease \(Int(lease)) s): this station stops "
                                + "so that the others can take its devices over")
                    }
                }
            }
        }
    }
}

/// When the heartbeat last succeeded, shared by the loop and its watchdog.
final class BeatTracker: Sendable {
    let last: Mutex<Date>
    init(_ date: Date) { last = Mutex(date) }
}

/// The latest progress per in-flight device, shared by the event hook and the heartbeat.
final class ProgressTable: Sendable {
    let table = Mutex<[String: DeviceProgress]>([:])
}

/// The running attempts by address (the heartbeat cancels the attempt of a device another station took over).
final class AttemptTasks: Sendable {
    private let tasks = Mutex<[String: Task<BatchScheduler.Finished, Never>]>([:])

    func add(_ address: String, _ task: Task<BatchScheduler.Finished, Never>) { tasks.withLock { $0[address] = task } }
    func remove(_ address: String) { _ = tasks.withLock { $0.removeValue(forKey: address) } }
    func cancel(_ address: String) { tasks.withLock { $0[address] }?.cancel() }
}
