import BLECore

/// One fault that fired, for the device state's fault log.
public struct FaultRecord: Codable, Sendable, Hashable, CustomStringConvertible {
    /// "disconnect", "power-loss", "stall", "reject", "drop", "corrupt-flash".
    public var kind: String
    /// The step or trigger that fired it ("after-create-data", "after-bytes=8192", "drop-rate").
    public var trigger: String
    /// Packet bytes received so far.
    public var bytesReceived: UInt64
    /// Device time, milliseconds.
    public var atMilliseconds: Double

    public init(kind: String, trigger: String, bytesReceived: UInt64, atMilliseconds: Double) {
        self.kind = kind
        self.trigger = trigger
        self.bytesReceived = bytesReceived
        self.atMilliseconds = atMilliseconds
    }

    enum CodingKeys: String, CodingKey {
        case kind, trigger
        case bytesReceived = "bytes_received"
        case atMilliseconds = "at_ms"
    }

    public var description: String { "\(kind) (\(trigger)) at \(bytesReceived) bytes, t=\(atMilliseconds) ms" }
}

/// The runtime side of a `FaultPlan`: which triggers fired, step counters, the generator, the log.
struct FaultInjector: Sendable {
    let plan: FaultPlan
    private var rng: SplitMix64
    private var fired: [Bool]
    private var matches: [Int]
    private var corruptionsDone: Set<UInt32> = []
    private(set) var log: [FaultRecord] = []

    init(plan: FaultPlan) {
        self.plan = plan
        rng = SplitMix64(seed: plan.seed)
        fired = Array(repeating: false, count: plan.triggers.count)
        matches = Array(repeating: 0, count: plan.triggers.count)
    }

    /// The first unfired trigger that matches `steps` in phase `after`; marks it fired.
    mutating func atStep(_ steps: [String], after: Bool) -> FaultTrigger? {
        for (index, trigger) in plan.triggers.enumerated() where !fired[index] {
            guard let text = trigger.step else { continue }
            let spec = StepSpec(text)
            guard spec.after == after, steps.contains(where: spec.covers) else { continue }
            matches[index] += 1
            if matches[index] == spec.occurrence {
                fired[index] = true
                return trigger
            }
        }
        return nil
    }

    /// The first unfired byte-count trigger reached at `total` bytes; marks it fired.
    mutating func afterBytes(_ total: UInt64) -> FaultTrigger? {
        for (index, trigger) in plan.triggers.enumerated() where !fired[index] {
            guard let limit = trigger.afterBytes, total >= limit else { continue }
            fired[index] = true
            return trigger
        }
        return nil
    }

    mutating func shouldDrop() -> Bool { plan.dropRate > 0 && rng.unit() < plan.dropRate }
    mutating func shouldDisconnect() -> Bool { plan.disconnectRate > 0 && rng.unit() < plan.disconnectRate }

    /// A bank offset inside [offset, offset + count) that is to be corrupted, once.
    mutating func corruption(offset: Int, count: Int) -> Int? {
        for target in plan.corruptFlashAt where !corruptionsDone.contains(target) {
            let position = Int(target)
            if position >= offset, position < offset + count {
                corruptionsDone.insert(target)
                return position - offset
            }
        }
        return nil
    }

    mutating func record(_ kind: String, _ trigger: String, bytes: UInt64, at now: Duration) {
        let (seconds, attoseconds) = now.components
        let ms = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        log.append(FaultRecord(kind: kind, trigger: trigger, bytesReceived: bytes, atMilliseconds: ms))
    }
}

extension FaultTrigger {
    /// How the log names this trigger.
    var label: String {
        if let step { return step }
        if let afterBytes { return "after-bytes=\(afterBytes)" }
        return action.rawValue
    }
}
