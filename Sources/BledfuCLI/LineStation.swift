import BLECore
import BledfuKit
import Batch
import Foundation
import SecureDFU
import Synchronization

/// What a station of a line needs from its host: its name and whether a process of it runs.
enum LineStation {
    /// The host name (the default station name).
    static func hostName() -> String {
        let name = ProcessInfo.processInfo.hostName
        return name.isEmpty ? "station" : name
    }

    /// Whether process `pid` of this host runs (a station whose process died is not live, whatever its heartbeat
    /// says). Reads /proc, so no signal is sent.
    static let isRunning: @Sendable (Int) -> Bool = { pid in
        pid > 0 && FileManager.default.fileExists(atPath: "/proc/\(pid)/stat")
    }
}

/// The journals of a line live in the shared store (docs/batch.md, "A line of stations"): the station copies a
/// device's journal from the store into its state directory before each `bledfu flash` child, and back into the
/// store at every heartbeat while the child runs and once more when it ends (the child removes the file when the
/// update is complete, and the store's copy goes with it). A station that takes a device over from a dead station
/// so resumes from the journal the dead station last pushed, and from what the device itself reports.
final class LineJournalSync: Sendable {
    let log: BatchLog
    let station: String
    let directory: URL
    /// Journal files of the devices in flight: file → (address, package SHA-256, last content pushed).
    private let inFlight = Mutex<[String: (address: String, sha: String, pushed: String?)]>([:])

    init(log: BatchLog, station: String, directory: URL) {
        self.log = log
        self.station = station
        self.directory = directory
    }

    func wrap(_ flasher: any DeviceFlasher) -> any DeviceFlasher { SyncingFlasher(inner: flasher, sync: self) }

    func file(address: String, sha: String) -> URL {
        directory.appendingPathComponent(JournalFileStore.fileName(deviceAddress: address, packageSHA256: sha))
    }

    /// Store → file before a child starts (the store's copy wins: it is the line's latest).
    func pull(address: String, sha: String) async {
        let url = file(address: address, sha: sha)
        let content = try? await log.journal(address: address, packageSHA256: sha)
        if let content, let data = content.data(using: .utf8) {
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try? data.write(to: url, options: .atomic)
        }
        inFlight.withLock { $0[url.path] = (address, sha, content) }
    }

    /// File → store for one device; `finished` ends its tracking.
    func push(path: String, finished: Bool) async {
        guard let entry = inFlight.withLock({ $0[path] }) else { return }
        let content = FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
        if content != entry.pushed {
            do {
                try await log.saveJournal(address: entry.address, packageSHA256: entry.sha, content: content, station: station, at: Date())
                inFlight.withLock { $0[path]?.pushed = content }
            } catch {
                // The next heartbeat (or the end of the child) tries again; the file stays on this station.
            }
        }
        if finished { _ = inFlight.withLock { $0.removeValue(forKey: path) } }
    }

    /// Every in-flight device's journal into the store (called after each heartbeat).
    func pushInFlight() async {
        for path in inFlight.withLock({ Array($0.keys) }).sorted() { await push(path: path, finished: false) }
    }

    struct SyncingFlasher: DeviceFlasher {
        let inner: any DeviceFlasher
        let sync: LineJournalSync

        func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async -> DeviceProbe {
            await inner.probe(target, adapter: adapter, options: options, afterUpdate: afterUpdate)
        }

        func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome {
            let address = job.target.address.description
            await sync.pull(address: address, sha: job.package.sha256)
            let outcome = await inner.flash(job, progress: progress)
            await sync.push(path: sync.file(address: address, sha: job.package.sha256).path, finished: true)
            return outcome
        }

        func adapterPresent(_ adapter: BatchPlan.Adapter) async -> Bool { await inner.adapterPresent(adapter) }
    }
}
