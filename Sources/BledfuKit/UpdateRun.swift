import Logging
import DFUCore

/// One update under way: an `AsyncSequence` of its events (Nordic's progress delegate, as a stream), its result,
/// and its controls (Nordic's controller: ``stop()`` is a pause that ends the run resumably, ``cancel()`` an
/// abort).
///
/// The events end when the update ends; ``result()`` then returns the ``UpdateResult`` or throws the
/// ``DFUError`` that ended it. Events are buffered, so a caller that only wants the result may ignore them.
public final class UpdateRun: AsyncSequence, Sendable {
    public typealias Element = UpdateEvent
    public typealias AsyncIterator = AsyncStream<UpdateEvent>.Iterator

    public let events: AsyncStream<UpdateEvent>
    private let task: Task<Result<UpdateResult, DFUError>, Never>
    private let flow: UpdateFlow
    private let verdict = UpdateVerdict()

    init(updater: Updater, request: UpdateRequest) {
        let (events, continuation) = AsyncStream.makeStream(of: UpdateEvent.self)
        self.events = events
        let activity = request.stallLimit.map { StallGuard(limit: $0, clock: updater.watchdogClock) }
        let flow = UpdateFlow(updater: updater, request: request, events: continuation, activity: activity)
        self.flow = flow
        let task = Task { () -> Result<UpdateResult, DFUError> in
            defer { continuation.finish() }
            do throws(DFUError) {
                return .success(try await flow.run())
            } catch {
                return .failure(error)
            }
        }
        self.task = task
        let verdict = verdict
        let watchdog = activity.map { activity in
            Task {
                guard let last = await activity.waitForStall() else { return }
                // Stalled: cancel the flow (every wait it could be in ends on cancellation, a lost wake-up too),
                // give it a moment to close its link, and end the run whether or not it did.
                updater.logger.debug(
                    "update stalled", metadata: ["last": "\(last)", "reactor": "\(StallGuard.reactorState)"])
                task.cancel()
                let stalled = activity.error(lastEvent: last)
                try? await activity.clock.sleep(for: StallGuard.grace, tolerance: nil)
                verdict.settle(.failure(stalled))
                continuation.finish()
            }
        }
        Task {
            var result = await task.value
            watchdog?.cancel()
            // A flow that failed after the watchdog cancelled it ended stalled (whatever the cancellation made of it).
            if case .failure = result, let activity, activity.fired {
                result = .failure(activity.error(lastEvent: activity.lastEvent))
            }
            verdict.settle(result)
        }
    }

    /// Whether a transfer is under way (between the first connection to the updater and the end of the last part):
    /// then ``stop()`` waits for a safe point.
    public var isTransferring: Bool { flow.isTransferring }

    /// The counters so far (bytes confirmed, resent, checkpoints, reconnects, parts skipped); final once the run
    /// ended, whether it succeeded or not.
    public var statistics: UpdateStatistics { flow.meter.statistics }

    public func makeAsyncIterator() -> AsyncStream<UpdateEvent>.Iterator { events.makeAsyncIterator() }

    /// Waits for the end of the update.
    public func result() async throws(DFUError) -> UpdateResult {
        try await verdict.value.get()
    }

    /// Stops at the next safe point (Secure DFU: once the object being sent is executed and journaled); the run
    /// then throws ``DFUError/Code/stopped`` and a later run with the same journal continues. Returns false when no
    /// transfer is under way yet: the run is then cancelled (nothing is lost) and ends at once.
    @discardableResult
    public func stop() -> Bool {
        let underWay = flow.requestStop()
        if !underWay { task.cancel() }
        return underWay
    }

    /// Stops now. With ``UpdateOptions/abortOnCancel`` the device is told to discard the upload (and the journal
    /// removed); otherwise the upload stays resumable from the last safe point. The run throws
    /// ``DFUError/Code/cancelled``.
    public func cancel() { task.cancel() }
}
