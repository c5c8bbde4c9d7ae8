import BLECore
import Logging

/// What the updater gives a family for one update: its clock, the user's options, the stop request, events, and
/// connections to the device wherever it goes next.
public struct UpdateContext: Sendable {
    /// The injected clock: every wait of a family is on it (a manual clock in tests).
    public let clock: UpdateClock
    public let options: UpdateOptions
    /// Set on Ctrl-C / ``UpdateRun/stop()``: stop at the next safe point.
    public let stop: StopSignal
    /// Trace per packet, debug per step; never warning or above.
    public let logger: Logger
    private let emitter: @Sendable (UpdateEvent) -> Void
    private let connector: @Sendable (DeviceLocation) async throws(DFUError) -> DFULink

    public init(
        clock: UpdateClock, options: UpdateOptions, stop: StopSignal = StopSignal(), logger: Logger,
        emit: @escaping @Sendable (UpdateEvent) -> Void,
        connect: @escaping @Sendable (DeviceLocation) async throws(DFUError) -> DFULink
    ) {
        self.clock = clock
        self.options = options
        self.stop = stop
        self.logger = logger
        self.emitter = emit
        self.connector = connect
    }

    /// Reports an event to the updater's listener.
    public func emit(_ event: UpdateEvent) { emitter(event) }

    /// Finds the device at `location` (scanning up to the updater's scan timeout), connects and exchanges the MTU.
    /// The caller closes the link. Throws ``DFUError/Code/notFound`` when it does not show up.
    public func connect(to location: DeviceLocation) async throws(DFUError) -> DFULink {
        try await connector(location)
    }

    /// Waits `duration` on the injected clock; a cancelled task ends it with ``DFUError/Code/cancelled``.
    public func sleep(for duration: Duration) async throws(DFUError) {
        guard duration > .zero else { return }
        do {
            try await clock.sleep(until: clock.now.advanced(by: duration), tolerance: nil)
        } catch {
            throw DFUError(.cancelled, "cancelled while waiting", cause: error)
        }
    }

    /// Runs `body` with a deadline on the injected clock: nil when the deadline passed first (the body is then
    /// cancelled). Waits on events, never polls.
    public func withDeadline<T: Sendable>(_ duration: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
        let clock = self.clock
        let deadline = clock.now.advanced(by: duration)
        return await withTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try? await clock.sleep(until: deadline, tolerance: nil)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}

/// What the updater gives a family for one part over one link: the update's context, the part's position, the
/// resume state from the journal, and the ways to report progress and save the journal.
public struct PartContext<Resume: Codable & Sendable>: Sendable {
    public let update: UpdateContext
    /// 0-based position of the part in the plan.
    public let index: Int
    public let count: Int
    /// The family's state for this part from the journal (nil: none, start the part from its beginning).
    public let resume: Resume?
    private let saver: @Sendable (Resume, Int) async -> Void
    private let reporter: @Sendable (PartProgress) -> Void

    public init(
        update: UpdateContext, index: Int, count: Int, resume: Resume?,
        checkpoint: @escaping @Sendable (Resume, Int) async -> Void, progress: @escaping @Sendable (PartProgress) -> Void
    ) {
        self.update = update
        self.index = index
        self.count = count
        self.resume = resume
        self.saver = checkpoint
        self.reporter = progress
    }

    public var isLast: Bool { index == count - 1 }

    /// A safe point: the device holds `confirmedBytes` of the part for sure and `state` lets a later run resume.
    /// The updater saves the journal before it returns (a journal that cannot be written is a warning, not a
    /// failure: it only speeds up a later resume).
    public func checkpoint(_ state: Resume, confirmedBytes: Int) async { await saver(state, confirmedBytes) }

    /// Bytes the device confirmed so far.
    public func progress(_ progress: PartProgress) { reporter(progress) }
}

/// A family's progress report for one part.
public struct PartProgress: Sendable, Hashable {
    public var bytesConfirmed: Int
    public var totalBytes: Int
    /// 0-based object being sent, for families with objects.
    public var objectIndex: Int?
    public var objectCount: Int?
    /// Failed checkpoints so far (this link).
    public var retries: Int
    /// Bytes sent more than once (this link).
    public var bytesResent: Int

    public init(
        bytesConfirmed: Int, totalBytes: Int, objectIndex: Int? = nil, objectCount: Int? = nil, retries: Int = 0,
        bytesResent: Int = 0
    ) {
        self.bytesConfirmed = bytesConfirmed
        self.totalBytes = totalBytes
        self.objectIndex = objectIndex
        self.objectCount = objectCount
        self.retries = retries
        self.bytesResent = bytesResent
    }
}
