import BLECore

/// What a triggered fault does.
public enum FaultAction: String, Codable, Sendable, Hashable {
    /// Drop the link (the bootloader sees a disconnect and reloads its settings).
    case disconnect
    /// Power loss: queued flash operations and RAM are lost; the device reboots.
    case powerLoss = "power-loss"
    /// Stop answering anything until the link drops.
    case stall
    /// Answer the request with `result` (and `extended`) instead of handling it.
    case reject
    /// Fill the flash queue (another module's operations, one page erase each) and then handle the request: a Create
    /// Data that follows is refused with 0x05 and Packet writes are dropped until the queue drains.
    case flashBusy = "flash-busy"
}

/// One fault that fires once, at a protocol step or after a number of firmware/init bytes.
///
/// Steps: `select-command`, `select-data`, `create-command`, `create-data`, `set-prn`, `checksum`,
/// `execute-command`, `execute-data`, `final-execute` (the last data object), `abort`, `packet`, and the groups
/// `select`, `create`, `execute` (any of their kind). A `before-` prefix (the default) fires before the request is
/// handled, `after-` once its response was sent. `#N` fires on the N-th occurrence (default 1).
public struct FaultTrigger: Codable, Sendable, Hashable {
    public var action: FaultAction
    /// A step such as "after-create-data#2"; nil with `afterBytes`.
    public var step: String?
    /// Fire once this many Packet bytes were received in total (across connections).
    public var afterBytes: UInt64?
    /// For `.reject`: the result code, and the extended error when the result is 0x0B.
    public var result: UInt8?
    public var extended: UInt8?

    enum CodingKeys: String, CodingKey {
        case action, step, result, extended
        case afterBytes = "after_bytes"
    }

    public init(
        action: FaultAction, step: String? = nil, afterBytes: UInt64? = nil, result: UInt8? = nil,
        extended: UInt8? = nil
    ) {
        self.action = action
        self.step = step
        self.afterBytes = afterBytes
        self.result = result
        self.extended = extended
    }
}

/// The faults a virtual device injects, deterministic for a seed. Codable (JSON) and parsable from CLI-like
/// strings:
///
/// | String | Meaning |
/// |---|---|
/// | `seed=42` | seed of the random faults |
/// | `disconnect-after-bytes=8192` | disconnect once 8192 Packet bytes arrived |
/// | `disconnect-at=after-create-data#2` | disconnect after the 2nd Create Data response |
/// | `disconnect-rate=0.001` | disconnect with this probability per received PDU |
/// | `drop-rate=0.01` | drop Packet writes silently with this probability (not counted for PRN) |
/// | `power-loss-at=before-execute` / `power-loss-after-bytes=6000` | power loss |
/// | `stall-at=execute` | stop answering from that step on |
/// | `flash-busy-at=before-create-data#2` | fill the flash queue, then handle the request (Create refused: 0x05) |
/// | `reject-at=execute-command:0B:05` | answer result 0x0B, extended 0x05 (hex) instead |
/// | `corrupt-flash-at=4096` | flip a bit of the flash write covering that bank offset |
/// | `slow-flash=4` | flash operations take 4 times longer |
/// | `crash-new-image=1` | SMP devices: an image booted for a test crashes before it is confirmed, so MCUboot reverts it |
public struct FaultPlan: Codable, Sendable, Hashable {
    public var seed: UInt64
    public var triggers: [FaultTrigger]
    public var dropRate: Double
    public var disconnectRate: Double
    public var corruptFlashAt: [UInt32]
    public var slowFlash: Double
    /// SMP devices (``SMPFaults/crashNewImage``): the test image never runs long enough to be confirmed.
    public var crashNewImage: Bool?

    enum CodingKeys: String, CodingKey {
        case seed, triggers
        case dropRate = "drop_rate"
        case disconnectRate = "disconnect_rate"
        case corruptFlashAt = "corrupt_flash_at"
        case slowFlash = "slow_flash"
        case crashNewImage = "crash_new_image"
    }

    public init(
        seed: UInt64 = 0, triggers: [FaultTrigger] = [], dropRate: Double = 0, disconnectRate: Double = 0,
        corruptFlashAt: [UInt32] = [], slowFlash: Double = 1
    ) {
        self.seed = seed
        self.triggers = triggers
        self.dropRate = dropRate
        self.disconnectRate = disconnectRate
        self.corruptFlashAt = corruptFlashAt
        self.slowFlash = slowFlash
    }

    public static let none = FaultPlan()

    /// Parses comma-separated `key=value` items (see the type's table).
    public init(parsing text: String) throws(FaultPlanError) {
        try self.init(parsing: text.split(separator: ",").map { String($0) })
    }

    /// Parses one `key=value` item per element.
    public init(parsing items: [String]) throws(FaultPlanError) {
        self.init()
        for raw in items {
            let item = raw.trimmingSpaces
            if item.isEmpty { continue }
            guard let eq = item.firstIndex(of: "=") else { throw FaultPlanError("'\(item)': expected key=value") }
            let key = String(item[..<eq]).lowercased()
            let value = String(item[item.index(after: eq)...])
            switch key {
            case "seed": seed = try Self.integer(value, key)
            case "drop-rate": dropRate = try Self.rate(value, key)
            case "disconnect-rate": disconnectRate = try Self.rate(value, key)
            case "slow-flash":
                guard let factor = Double(value), factor > 0 else {
                    throw FaultPlanError("\(key): '\(value)' is not a positive number")
                }
                slowFlash = factor
            case "corrupt-flash-at": corruptFlashAt.append(UInt32(truncatingIfNeeded: try Self.integer(value, key)))
            case "disconnect-after-bytes":
                triggers.append(FaultTrigger(action: .disconnect, afterBytes: try Self.integer(value, key)))
            case "power-loss-after-bytes":
                triggers.append(FaultTrigger(action: .powerLoss, afterBytes: try Self.integer(value, key)))
            case "disconnect-at": triggers.append(FaultTrigger(action: .disconnect, step: try Self.step(value, key)))
            case "power-loss-at": triggers.append(FaultTrigger(action: .powerLoss, step: try Self.step(value, key)))
            case "stall-at": triggers.append(FaultTrigger(action: .stall, step: try Self.step(value, key)))
            case "crash-new-image":
                guard ["1", "true"].contains(value.lowercased()) else { throw FaultPlanError("\(key): expected 1 or true, got '\(value)'") }
                crashNewImage = true
            case "flash-busy-at":
                triggers.append(FaultTrigger(action: .flashBusy, step: try Self.step(value, key)))
            case "reject-at":
                let parts = value.split(separator: ":").map(String.init)
                guard parts.count == 2 || parts.count == 3, let result = UInt8(parts[1], radix: 16) else {
                    throw FaultPlanError("\(key): expected STEP:RESULT[:EXTENDED] in hex, got '\(value)'")
                }
                var extended: UInt8?
                if parts.count == 3 {
                    guard let ext = UInt8(parts[2], radix: 16) else {
                        throw FaultPlanError("\(key): bad extended code '\(parts[2])'")
                    }
                    extended = ext
                }
                triggers.append(
                    FaultTrigger(
                        action: .reject, step: try Self.step(parts[0], key), result: result, extended: extended))
            default: throw FaultPlanError("unknown fault '\(key)'")
            }
        }
    }

    static let stepNames: Set<String> = Set<String>([
        "select-command", "select-data", "create-command", "create-data", "set-prn", "checksum", "execute-command",
        "execute-data", "final-execute", "abort", "packet", "select", "create", "execute",
    ]).union(legacyStepNames)

    /// Steps of the Legacy DFU devices (docs/simulator.md, "Legacy DFU devices").
    static let legacyStepNames: Set<String> = [
        "start", "init", "init-complete", "prn-request", "receive", "validate", "activate", "reset", "report-size",
    ]

    static func step(_ value: String, _ key: String) throws(FaultPlanError) -> String {
        let spec = StepSpec(value)
        guard stepNames.contains(spec.name), spec.occurrence >= 1 else {
            throw FaultPlanError(
                "\(key): unknown step '\(value)' (known: \(stepNames.sorted().joined(separator: ", ")))")
        }
        return value.lowercased()
    }

    static func integer(_ value: String, _ key: String) throws(FaultPlanError) -> UInt64 {
        let parsed = value.hasPrefix("0x") ? UInt64(value.dropFirst(2), radix: 16) : UInt64(value)
        guard let parsed else { throw FaultPlanError("\(key): '\(value)' is not a number") }
        return parsed
    }

    static func rate(_ value: String, _ key: String) throws(FaultPlanError) -> Double {
        guard let rate = Double(value), (0...1).contains(rate) else {
            throw FaultPlanError("\(key): '\(value)' is not in 0...1")
        }
        return rate
    }
}

/// A fault plan that cannot be parsed.
public struct FaultPlanError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The text is not a fault plan (an unknown key, a value out of range).
        public static let invalidPlan = Code(rawValue: "invalid-fault-plan")
    }

    public var code: Code { .invalidPlan }
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var message: String { reason }
    public var description: String { "fault plan: \(reason)" }
}

/// A parsed step: phase (before/after), name, occurrence.
struct StepSpec: Hashable, Sendable {
    var after: Bool
    var name: String
    var occurrence: Int

    init(_ text: String) {
        var body = text.lowercased()
        var occurrence = 1
        if let hash = body.firstIndex(of: "#") {
            occurrence = Int(body[body.index(after: hash)...]) ?? 0
            body = String(body[..<hash])
        }
        after = body.hasPrefix("after-")
        if body.hasPrefix("after-") { body.removeFirst(6) } else if body.hasPrefix("before-") { body.removeFirst(7) }
        name = body
        self.occurrence = occurrence
    }

    /// Whether this spec's name covers the concrete step `step`.
    func covers(_ step: String) -> Bool {
        name == step || step.hasPrefix(name + "-") || (name == "execute" && step == "final-execute")
    }
}

extension String {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
