/// How ``AdaptiveStreamPacing`` learns from a failed or clean object: who is to blame for a loss (the prepare
/// delay, the burst's length, the pause between paced bursts) and how each value moves (docs/benchmarks.md "How
/// adaptive works").
extension AdaptiveStreamPacing {
    /// A loss in an object whose bursts were paced. One run of lost packets in the first burst (right after the
    /// prepare delay) blames the delay: a device still erasing drops everything until it is done. Anything else (a
    /// run in a later burst, or losses the engine could not place as one run: buffers that overflow again and
    /// again) blames the pause. Returns true (the loss is accounted for).
    mutating func pacedObjectLost(_ outcome: CheckpointOutcome, lostAt: Int?) -> Bool {
        if let lostAt, lostAt < objectFirstBurst, !delayProven {
            if !delayFailedForObject { delayTooShortNow() }
            delayFailedForObject = true
        } else {
            pauseTooShortNow()
        }
        objectPaced = false
        if outcome == .mismatch { startObject() }
        burstEndsObject = false
        burstUsesReceipt = false
        return true
    }

    /// The device cannot take the last burst back to back (its flash writes slower than the link delivers; a loaded
    /// host may let such a burst through now and then): bursts are limited to what it took before the first loss
    /// when the engine located it, else to the longest clean burst shorter than this one; the prepare delay stays.
    mutating func burstTooLongLost(_ outcome: CheckpointOutcome, lostAt: Int?) {
        burstTooLong = min(burstTooLong ?? .max, lastBurstPackets)
        let taken = lostAt.map { $0 - burstStart }.flatMap { (1..<lastBurstPackets).contains($0) ? $0 : nil }
        let limit =
            taken ?? cleanBurstLengths.filter { $0 < lastBurstPackets }.max() ?? max(1, lastBurstPackets / 2)
        burstLimit = min(burstLimit ?? .max, limit)
        longestCleanBurst = min(longestCleanBurst, limit)
        interval = limit
        cleanObjectsAtLimit = 0
        startPacingIfUseful()
        if outcome == .mismatch { startObject() }
        burstEndsObject = false
        burstUsesReceipt = false
    }

    /// ``Tuning/confirmObjects`` objects in a row at one delay, none losing anything since Create, prove the delay for
    /// the shortest of their first bursts (one clean object may be luck: a delay at the edge passes now and then).
    mutating func proveDelay() {
        if objectLost || streak?.delay != prepareDelay {
            streak = objectLost ? nil : (prepareDelay, [])
        }
        guard var current = streak else { return }
        current.firstBursts = Array((current.firstBursts + [objectFirstBurst]).suffix(tuning.confirmObjects))
        streak = current
        guard current.firstBursts.count >= tuning.confirmObjects, let firstBurst = current.firstBursts.min(),
            !provenDelays.contains(where: { $0.delay <= current.delay && $0.firstBurst >= firstBurst })
        else { return }
        provenDelays.removeAll { $0.delay >= current.delay && $0.firstBurst <= firstBurst }
        provenDelays.append((firstBurst, current.delay))
    }

    /// After ``Tuning/confirmObjects`` clean objects at the burst limit, tries halfway to the shortest burst that
    /// was too long, until the two are one packet apart or within half of ``Tuning/delayTolerance`` of the longer
    /// (each failed try costs a loss).
    mutating func probeLongerBursts() {
        // While paced, a loss would not tell a too long burst from a too short pause: the limit stays.
        guard pause == nil, let limit = burstLimit, let tooLong = burstTooLong else { return }
        cleanObjectsAtLimit += 1
        guard cleanObjectsAtLimit >= tuning.confirmObjects else { return }
        cleanObjectsAtLimit = 0
        let gap = tooLong - limit
        guard gap > 1, Double(gap) > Double(tooLong) * tuning.delayTolerance / 2 else { return }
        let probe = (limit + tooLong) / 2
        burstLimit = probe
        interval = max(interval, probe)
        if let intervalCap { interval = min(interval, intervalCap) }
    }

    /// A burst limit (the device cannot take a whole object back to back) with a prepare delay that carried an
    /// object: pace the bursts instead of checking each (``Tuning/pauseStep``).
    mutating func startPacingIfUseful() {
        guard pause == nil, !pacingEnded, let step = tuning.pauseStep, let burstLimit, burstLimit < objectPackets,
            shortestCleanDelay != nil
        else { return }
        pause = step
        cleanObjectsAtPause = 0
    }

    mutating func pausedObjectClosedCleanly() {
        guard let current = pause else { return }
        cleanObjectsAtPause += 1
        guard cleanObjectsAtPause >= tuning.confirmObjects else { return }
        cleanObjectsAtPause = 0
        guard let tooShort = pauseTooShort else {
            let half = Self.micros(current) / 2
            pause = half < 1_000 ? .zero : .microseconds(half)
            return
        }
        let enough = min(pauseEnough ?? current, current)
        pauseEnough = enough
        if Self.micros(enough - tooShort) > Int64(Double(Self.micros(enough)) * tuning.delayTolerance) {
            pause = .microseconds((Self.micros(tooShort) + Self.micros(enough)) / 2)
        } else {
            pause = enough
        }
    }

    mutating func pauseTooShortNow() {
        guard let failed = pause, let step = tuning.pauseStep else { return }
        pauseTooShort = max(pauseTooShort ?? .zero, failed)
        if let enough = pauseEnough, enough <= failed { pauseEnough = nil }
        let raised = pauseEnough ?? (failed == .zero ? step : failed * 2)
        cleanObjectsAtPause = 0
        if raised > tuning.maximumPause {
            // The device needs about a round trip between bursts anyway: checkpoints between them, as before.
            pause = nil
            pacingEnded = true
        } else {
            pause = raised
        }
    }

    /// The prepare delay was too short: it doubles (from ``Tuning/delayStep``), or bisects towards a delay known to be
    /// enough.
    mutating func delayTooShortNow() {
        let failed = prepareDelay
        delayTooShort = max(delayTooShort ?? .zero, failed)
        if let enough = delayEnough, enough <= failed { delayEnough = nil }
        let raised = failed == .zero ? tuning.delayStep : failed * 2
        prepareDelay = min(delayEnough ?? raised, tuning.maximumDelay)
        cleanObjectsAtDelay = 0
    }
}
