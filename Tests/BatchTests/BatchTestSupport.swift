import BLECore
import Foundation
import Synchronization

@testable import Batch

/// A fake per-device flash: scripted results per address, counts calls and concurrency, and (optionally) holds
/// every flash until `hold` of them are running at once, so a concurrency bound is observed without timing.
final class FakeFlasher: DeviceFlasher {
    struct Script: Sendable {
        /// Installed application version the probe reports (nil: unreachable).
        var installed: UInt32? = 1
        /// Results of the flash attempts, in order; the last one repeats.
        var results: [Bool] = [true]
        var retryable = true
        /// After a successful flash the device comes back in its bootloader.
        var staysInBootloader = false
    }

    struct Counters: Sendable {
        var flashes: [String: Int] = [:]
        var probes: [String: Int] = [:]
        var active: [String: Int] = [:]
        var maxActive: [String: Int] = [:]
        var activeTotal = 0
        var maxActiveTotal = 0
        var bootloaderNames: [String: String] = [:]
        var waiting: [CheckedContinuation<Void, Never>] = []
        var released = 0
        /// Addresses in the order their flashes started.
        var order: [String] = []
    }

    let scripts: [String: Script]
    let defaultScript: Script
    /// Hold flashes until this many run at once (or all the rest do); nil runs them straight through.
    let hold: Int?
    let total: Int
    let counters = Mutex(Counters())

    init(scripts: [String: Script] = [:], defaultScript: Script = Script(), hold: Int? = nil, total: Int = 0) {
        self.scripts = scripts
        self.defaultScript = defaultScript
        self.hold = hold
        self.total = total
    }

    func script(_ address: String) -> Script { scripts[address] ?? defaultScript }

    func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async -> DeviceProbe {
        let address = target.address.description
        let flashed = counters.withLock { counters in
            counters.probes[address, default: 0] += 1
            return counters.flashes[address, default: 0]
        }
        let script = script(address)
        guard let installed = script.installed else { return DeviceProbe(mode: .unreachable, error: "no answer") }
        let succeeded = afterUpdate && flashed > 0
        if succeeded, script.staysInBootloader { return DeviceProbe(mode: .bootloader) }
        return DeviceProbe(mode: .application, applicationVersion: succeeded ? 2 : installed, name: "Fake-\(address.suffix(2))")
    }

    func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
        let address = job.target.address.description
        let attempt = counters.withLock { counters in
            counters.flashes[address, default: 0] += 1
            counters.order.append(address)
            counters.active[job.adapter.label, default: 0] += 1
            counters.maxActive[job.adapter.label] = max(counters.maxActive[job.adapter.label] ?? 0, counters.active[job.adapter.label] ?? 0)
            counters.activeTotal += 1
            counters.maxActiveTotal = max(counters.maxActiveTotal, counters.activeTotal)
            if let name = job.bootloaderName { counters.bootloaderNames[address] = name }
            return counters.flashes[address] ?? 1
        }
        progress(DeviceProgress(stage: "uploading", bytes: job.package.totalBytes / 2, total: job.package.totalBytes))
        if let hold {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready: [CheckedContinuation<Void, Never>] = counters.withLock { counters in
                    counters.waiting.append(continuation)
                    let remaining = total - counters.released
                    guard counters.waiting.count >= min(hold, remaining) else { return [] }
                    let all = counters.waiting
                    counters.waiting = []
                    counters.released += all.count
                    return all
                }
                for waiter in ready { waiter.resume() }
            }
        }
        counters.withLock { counters in
            counters.active[job.adapter.label, default: 1] -= 1
            counters.activeTotal -= 1
        }
        let script = script(address)
        let success = script.results[min(attempt - 1, script.results.count - 1)]
        return success
            ? FlashOutcome(success: true, exitCode: 0, bytes: job.package.totalBytes, resends: 3)
            : FlashOutcome(success: false, error: "remote error: \"wrong hardware version\", extended 0x06", exitCode: 40, bytes: 100, retryable: script.retryable)
    }
}

enum Fixture {
    static func temporaryDatabase() async throws -> (log: BatchLog, url: URL) {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("fleet-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent("batch.sqlite")
        return (try await BatchLog.open(path: url.path), url)
    }

    /// Removes a database made by ``temporaryDatabase()`` with its directory (WAL and shared-memory files too).
    static func remove(_ database: URL) {
        // Cleanup only: a leftover temporary directory fails no test.
        try? FileManager.default.removeItem(at: database.deletingLastPathComponent())
    }

    static func address(_ index: Int) -> BluetoothAddress {
        guard let address = BluetoothAddress(bytes: [0xC6, 0x05, 0x04, 0x03, UInt8(index >> 8), UInt8(index & 0xFF)]) else {
            preconditionFailure("six bytes always make an address")
        }
        return address
    }

    static func targets(_ count: Int, className: String = "bracelet") -> [BatchTarget] {
        (0..<count).map { BatchTarget(peer: PeerAddress(address($0 + 1), type: .random), name: "Bracelet-\($0 + 1)", className: className) }
    }

    /// The station the scheduler tests run as (one station alone; its previous instance is never alive).
    static let station = StationInfo(name: "station", host: "localhost", pid: 0, adapters: "hci0×1", planHash: "plan", lease: 30)

    static let package = PackageInfo(path: "/tmp/app-v2.zip", sha256: String(repeating: "ab", count: 32), targetVersion: 2, totalBytes: 1000)

    static func plan(adapters: [(String, Int)], retries: Int = 1, stopAfter: Int? = nil, skip: Bool = true) -> BatchPlan {
        var plan = BatchPlan(
            adapters: adapters.map { BatchPlan.Adapter(name: $0.0, connections: $0.1) },
            classes: [BatchPlan.DeviceClass(name: "bracelet", package: package.path)])
        plan.policies = BatchPlan.Policies(retries: retries, skipAtTargetVersion: skip, stopAfterFailures: stopAfter)
        return plan
    }

    /// A clock that advances one second per reading (durations and timestamps without waiting).
    static func steppingClock() -> @Sendable () -> Date {
        let tick = Mutex(0.0)
        return {
            let seconds = tick.withLock { value in
                value += 1
                return value
            }
            return Date(timeIntervalSince1970: 1_800_000_000 + seconds)
        }
    }

    static func scheduler(_ plan: BatchPlan, flasher: FakeFlasher, log: BatchLog, batch: String = "line.yaml") -> BatchScheduler {
        var scheduler = BatchScheduler(plan: plan, packages: ["bracelet": package], flasher: flasher, log: log, batch: batch)
        scheduler.now = steppingClock()
        return scheduler
    }
}
