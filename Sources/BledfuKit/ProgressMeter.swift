import DFUCore
import Synchronization

/// Turns a family's ``PartProgress`` into ``UpdateProgress`` events with rates on the updater's clock, and keeps
/// the update's counters (``UpdateStatistics``).
final class ProgressMeter: Sendable {
    /// The window of the current rate.
    static let window: Duration = .seconds(3)

    private struct State {
        var statistics = UpdateStatistics()
        /// The current run (one part over one link): its start and the bytes confirmed before it.
        var runStart: UpdateClock.Instant?
        var runBase: Int?
        var runConfirmed = 0
        var runResent = 0
        var samples: [(time: UpdateClock.Instant, bytes: Int)] = []
    }

    private let clock: UpdateClock
    private let started: UpdateClock.Instant
    private let state = Mutex(State())

    init(clock: UpdateClock) {
        self.clock = clock
        self.started = clock.now
    }

    var statistics: UpdateStatistics {
        var statistics = state.withLock { $0.statistics }
        statistics.seconds = (Self.seconds(started.duration(to: clock.now)) * 1000).rounded() / 1000
        return statistics
    }

    func countCheckpoint() { state.withLock { $0.statistics.checkpoints += 1 } }
    func countReconnect() { state.withLock { $0.statistics.reconnects += 1 } }
    func countSkipped() { state.withLock { $0.statistics.partsSkipped += 1 } }
    func countLinkLoss() { state.withLock { $0.statistics.linkLosses += 1 } }

    /// A part starts over one link; `base` bytes of it were confirmed before (a resume).
    func beginRun(base: Int) {
        let now = clock.now
        state.withLock { state in
            state.runStart = now
            state.runBase = base
            state.samples = []
        }
    }

    /// The run ended (done or failed): its bytes go into the totals.
    func endRun() {
        state.withLock { state in
            state.statistics.bytesSent += state.runConfirmed
            state.statistics.bytesResent += state.runResent
            state.runConfirmed = 0
            state.runResent = 0
            state.runStart = nil
            state.runBase = nil
            state.samples = []
        }
    }

    /// Final duration (call at the end).
    func finish() {}

    /// The event for a family's report.
    func report(_ progress: PartProgress, part: Int, parts: Int) -> UpdateProgress {
        let now = clock.now
        return state.withLock { state in
            let base = state.runBase ?? progress.bytesConfirmed
            state.runBase = base
            state.runConfirmed = max(0, progress.bytesConfirmed - base)
            state.runResent = progress.bytesResent
            state.samples.append((now, progress.bytesConfirmed))
            state.samples.removeAll { $0.time.duration(to: now) > Self.window }
            let runSeconds = state.runStart.map { Self.seconds($0.duration(to: now)) } ?? 0
            let average = runSeconds > 0 ? Double(state.runConfirmed) / runSeconds : 0
            var current = average
            if let first = state.samples.first, first.time < now {
                let seconds = Self.seconds(first.time.duration(to: now))
                if seconds > 0.2 { current = Double(progress.bytesConfirmed - first.bytes) / seconds }
            }
            let remaining = progress.totalBytes - progress.bytesConfirmed
            return UpdateProgress(
                part: part + 1, parts: parts, object: progress.objectIndex.map { $0 + 1 }, objects: progress.objectCount,
                bytes: progress.bytesConfirmed, total: progress.totalBytes, bytesPerSecond: Int(current),
                averageBytesPerSecond: Int(average), retries: progress.retries, bytesResent: progress.bytesResent,
                etaSeconds: current > 0 ? Int(Double(remaining) / current) : nil)
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return (Double(seconds) + Double(attoseconds) / 1e18)
    }
}
