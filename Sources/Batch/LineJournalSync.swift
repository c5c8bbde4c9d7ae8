import BLECore
import Foundation
import Synchronization

/// The journals of a line live in the shared store (docs/batch.md, "A line of stations"): the station copies a
/// device's journal from the store into its state directory before each `bledfu flash` child, and back into the
/// store at every heartbeat while the child runs and once more when it ends (the child removes the file when the
/// update is complete, and the store's copy goes with it). Only while the station holds the device's claim: a station
/// whose device was taken over never overwrites the taker's journal. A station that takes a device over from a dead
/// station so resumes from the journal the dead station last pushed, and from what the device itself reports.
public final class LineJournalSync: Sendable {
    let log: BatchLog
    let station: String
    let directory: URL
    /// The journal file's name in `directory` for a device and package (`JournalFileStore.fileName` of BledfuKit).
    let fileName: @Sendable (_ address: String, _ packageSHA256: String) -> String
    /// Journal files of the devices in flight: file → (address, package SHA-256, last content pushed).
    private let inFlight = Mutex<[String: (address: String, sha: String, pushed: String?)]>([:])

    public init(
        log: BatchLog, station: String, directory: URL, fileName: @escaping @Sendable (_ address: String, _ packageSHA256: String) -> String
    ) {
        self.log = log
        self.station = station
        self.directory = directory
        self.fileName = fileName
    }

    /// `flasher` with each flash between a pull and a push of the device's journal.
    public func wrap(_ flasher: any DeviceFlasher) -> any DeviceFlasher { SyncingFlasher(inner: flasher, sync: self) }

    func file(address: String, sha: String) -> URL {
        directory.appendingPathComponent(fileName(address, sha))
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
            } catch where error.code == .claimLost {
                // Another station took the device over: its journal is the line's now, this station's copy is stale.
                _ = inFlight.withLock { $0.removeValue(forKey: path) }
                return
            } catch {
                // The next heartbeat (or the end of the child) tries again; the file stays on this station.
            }
        }
        if finished { _ = inFlight.withLock { $0.removeValue(forKey: path) } }
    }

    /// Every in-flight device's journal into the store (called after each heartbeat).
    public func pushInFlight() async {
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
