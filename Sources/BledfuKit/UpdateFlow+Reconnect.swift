import BLECore
import DFUCore

extension UpdateFlow {
    /// Connects to the family's updater again. After a lost link (`loss`) this is one disconnect episode of the
    /// ``ReconnectPolicy``: up to `attempts` attempts, each after its backoff on the updater's clock (a stop request
    /// ends the wait at once); between parts (`loss` nil) one attempt, which scans for up to the scan timeout.
    /// Returns the updater's link and where it was found (with every name it was looked for by).
    func reconnect(_ location: DeviceLocation, after loss: DFUError?, session: any FamilySession) async throws(DFUError)
        -> OpenedUpdater
    {
        let policy = request.reconnect
        var last: DFUError?
        for attempt in 0..<(loss == nil ? 1 : policy.attempts) {
            if loss != nil {
                let delay = policy.delay(beforeAttempt: attempt)
                emit(.reconnecting(attempt: attempt + 1, of: policy.attempts, delayMilliseconds: Int(delay / .milliseconds(1))))
                try await waitUnlessStopped(delay)
                meter.countReconnect()
            }
            if stop.isRequested { throw DFUError(.stopped, "stopped before reconnecting", cause: loss) }
            do {
                return try await openUpdater(initial: nil, location: location, sessions: [session])
            } catch {
                if [.noUpdateService, .remoteRefusal, .cancelled].contains(error.code) { throw error }
                last = error
                if loss == nil { break }
            }
        }
        guard let loss else { throw last ?? DFUError(.notFound, "the updater was not found") }
        throw DFUError(
            loss.code, "\(loss.message); reconnecting failed (\(last?.message ?? "no answer"))", cause: loss.cause ?? loss,
            family: loss.family)
    }

    /// After a last step that went unacknowledged: finds the device at its updater's or its application's place.
    /// Returns nil when it runs an application (the step took effect: an updater with an unfinished update stays
    /// in its updater), else the updater's link to resume on.
    func confirmInstalled(_ location: DeviceLocation, session: any FamilySession) async throws(DFUError) -> DFULink? {
        try await pause(request.options.rebootDelay)
        let (link, _) = try await findAndConnect(location, notFound: .linkLost)
        do {
            switch try await detect(on: link, sessions: [session]) {
            case .ready: return link
            case .jump:
                await link.close()
                return nil
            }
        } catch where error.code == .noUpdateService {
            await link.close()
            return nil
        } catch {
            await link.close()
            throw error
        }
    }

    /// Waits `duration` on the updater's clock, or until a stop is requested.
    func waitUnlessStopped(_ duration: Duration) async throws(DFUError) {
        guard duration > .zero, !stop.isRequested else { return }
        let clock = self.clock
        let stop = self.stop
        let deadline = clock.now.advanced(by: duration)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
            group.addTask { await stop.requested() }
            await group.next()
            group.cancelAll()
        }
        if Task.isCancelled { throw DFUError(.cancelled, "cancelled while waiting to reconnect") }
    }
}
