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

    init(updater: Updater, request: UpdateRequest) {
        let (events, continuation) = AsyncStream.makeStream(of: UpdateEvent.self)
        self.events = events
        let flow = UpdateFlow(updater: updater, request: request, events: continuation)
        self.flow = flow
        task = Task {
            defer { continuation.finish() }
            do throws(DFUError) {
                return .success(try await flow.run())
            } catch {
                return .failure(error)
            }
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
        try await task.value.get()
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
