/// What a Legacy update records across connections and runs: the family's journal payload.
///
/// Legacy DFU cannot resume inside an image: a lost link, a refused packet, a failed validation or a killed tool
/// restarts the image from zero. The journal records which parts are installed (a multi-part package goes on with
/// the next part, never sends an installed one again) and every restart: which part, why, how many bytes were sent
/// for nothing. Stored as JSON (`Codable`):
///
///     {"part_index":1,"restarts":[{"part":1,"code":"disconnected","reason":"link lost after 8192 of 22076 bytes…",
///      "bytes_resent":8192}]}
public struct LegacyJournal: Codable, Hashable, Sendable {
    /// One image sent again from zero.
    public struct Restart: Codable, Hashable, Sendable {
        public var part: Int
        /// The ``LegacyDFUError/Code`` that ended the attempt ("disconnected", "bytes-lost", "device-reset", …).
        public var code: String
        public var reason: String
        /// Bytes of the part that the lost attempt had sent (sent again by the next one).
        public var bytesResent: Int
        /// The pacing window (packets) when the attempt lost packets or failed validation, nil when streaming or
        /// for other restarts: the next attempt slows down from it (``LegacyPacingPolicy/attemptLost(window:)``).
        public var window: Int?
        /// Whether the attempt ended because the data did not arrive intact (packets lost, validation failed), so
        /// the pacing must slow down.
        public var slowsDown: Bool

        public init(part: Int, code: String, reason: String, bytesResent: Int, window: Int? = nil, slowsDown: Bool = false) {
            self.part = part
            self.code = code
            self.reason = reason
            self.bytesResent = bytesResent
            self.window = window
            self.slowsDown = slowsDown
        }

        enum CodingKeys: String, CodingKey {
            case part, code, reason, window
            case bytesResent = "bytes_resent"
            case slowsDown = "slows_down"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            part = try container.decode(Int.self, forKey: .part)
            code = try container.decode(String.self, forKey: .code)
            reason = try container.decode(String.self, forKey: .reason)
            bytesResent = try container.decodeIfPresent(Int.self, forKey: .bytesResent) ?? 0
            window = try container.decodeIfPresent(Int.self, forKey: .window)
            slowsDown = try container.decodeIfPresent(Bool.self, forKey: .slowsDown) ?? false
        }
    }

    /// The part being sent; the parts before it are installed.
    public var partIndex: Int
    public var restarts: [Restart]
    /// An attempt started and has not ended in a recorded restart: when the next run finds it so, the previous run
    /// stopped during the image (killed, crashed, power cut on the host).
    public var openAttempt: Bool
    /// Bytes the open attempt had sent at its last checkpoint (what a killed run sent for nothing, at least).
    public var attemptBytes: Int
    /// The address of the bootloader the host reset in the middle of an image (the last attempt ended in
    /// `device-reset`), until the next attempt looks where the device came back: a bootloader at address + 1 (no
    /// peer data) means the device booted no application after the reset (legacy-dfu.md §7.4, §7.5).
    public var resetAt: String?

    public init(
        partIndex: Int = 0, restarts: [Restart] = [], openAttempt: Bool = false, attemptBytes: Int = 0, resetAt: String? = nil
    ) {
        self.partIndex = partIndex
        self.restarts = restarts
        self.openAttempt = openAttempt
        self.attemptBytes = attemptBytes
        self.resetAt = resetAt
    }

    enum CodingKeys: String, CodingKey {
        case partIndex = "part_index"
        case restarts
        case openAttempt = "open_attempt"
        case attemptBytes = "attempt_bytes"
        case resetAt = "reset_at"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        partIndex = try container.decodeIfPresent(Int.self, forKey: .partIndex) ?? 0
        restarts = try container.decodeIfPresent([Restart].self, forKey: .restarts) ?? []
        openAttempt = try container.decodeIfPresent(Bool.self, forKey: .openAttempt) ?? false
        attemptBytes = try container.decodeIfPresent(Int.self, forKey: .attemptBytes) ?? 0
        resetAt = try container.decodeIfPresent(String.self, forKey: .resetAt)
    }

    /// An attempt at `part` starts; one the previous run left open is recorded as a restart (the tool stopped).
    public mutating func beginAttempt(part: Int) {
        if openAttempt {
            restarts.append(
                Restart(
                    part: part, code: "killed", reason: "the previous run stopped during the image (killed or crashed)",
                    bytesResent: attemptBytes))
        }
        openAttempt = true
        attemptBytes = 0
    }

    /// Records an attempt at `part` that ended in `error` after `bytesSent` bytes (with windows of `window` packets).
    public mutating func recordRestart(part: Int, error: LegacyDFUError, bytesSent: Int, window: Int? = nil) {
        let slows = error.code == .bytesLost || error.reason.hasPrefix("Validate")
        openAttempt = false
        attemptBytes = 0
        restarts.append(
            Restart(part: part, code: error.code.rawValue, reason: error.reason, bytesResent: bytesSent, window: window, slowsDown: slows))
    }

    /// `policy` slowed down by every attempt at `part` that lost data (the pacing an attempt learned, for the next).
    public func pacing(_ policy: any LegacyPacingPolicy, for part: Int) -> any LegacyPacingPolicy {
        var policy = policy
        for restart in restarts where restart.part == part && restart.slowsDown { policy.attemptLost(window: restart.window) }
        return policy
    }

    /// The part at `index` is installed: the next run starts with the part after it.
    public mutating func partInstalled(_ index: Int) {
        partIndex = max(partIndex, index + 1)
        openAttempt = false
    }

    public var bytesResent: Int { restarts.reduce(0) { $0 + $1.bytesResent } }

    /// Restarts of `part` so far, and how many of them were failed validations.
    /// The restarts of `part` that count against ``LegacyRestartPolicy``: the ones the device or the link caused.
    /// A run that was killed is not one (the user decides how often to stop the tool), nor is the reset of a device
    /// still busy with the transfer an interruption left (it follows that interruption, which counted, or a kill):
    /// each interruption can leave at most one such reset, so the count still ends every update.
    public func restarts(of part: Int) -> (all: Int, validation: Int) {
        let mine = restarts.filter { $0.part == part }
        let counted = mine.filter { $0.code != "killed" && $0.reason != LegacyDFUStateMachine.busyReason }
        return (counted.count, mine.filter { $0.reason.hasPrefix("Validate") }.count)
    }

    /// The summary of `part`'s restarts: "restarted once, 8192 bytes sent again (tool stopped ×1)", or nil.
    public func summary(of part: Int) -> String? {
        LegacyJournal(partIndex: partIndex, restarts: restarts.filter { $0.part == part }).summary
    }

    /// For the summary: "restarted 2 times, 8200 bytes sent again (link lost ×1, packets lost ×1)", or nil.
    public var summary: String? {
        guard !restarts.isEmpty else { return nil }
        var counts: [(String, Int)] = []
        for restart in restarts {
            let why = Self.label(restart)
            if let index = counts.firstIndex(where: { $0.0 == why }) { counts[index].1 += 1 } else { counts.append((why, 1)) }
        }
        let reasons = counts.map { "\($0.0) ×\($0.1)" }.joined(separator: ", ")
        let times = restarts.count == 1 ? "once" : "\(restarts.count) times"
        return "restarted \(times), \(bytesResent) bytes sent again (\(reasons))"
    }

    static func label(_ restart: Restart) -> String {
        switch restart.code {
        case LegacyDFUError.Code.disconnected.rawValue: "link lost"
        case LegacyDFUError.Code.bytesLost.rawValue: "packets lost"
        case LegacyDFUError.Code.deviceReset.rawValue where restart.reason.hasPrefix("Validate"): "validation failed"
        case LegacyDFUError.Code.deviceReset.rawValue: "device busy with an earlier transfer"
        case LegacyDFUError.Code.timeout.rawValue: "device stopped answering"
        case "killed": "tool stopped"
        default: restart.code
        }
    }
}

/// How often a part may start again from zero before the update gives up (issue point 4: bounded by the
/// reconnect policy). A failed validation is repeated once at most: twice means the package does not fit the device.
public struct LegacyRestartPolicy: Hashable, Sendable {
    public var maximumRestarts: Int
    public var maximumValidationFailures: Int

    public init(maximumRestarts: Int = 5, maximumValidationFailures: Int = 2) {
        self.maximumRestarts = max(0, maximumRestarts)
        self.maximumValidationFailures = max(1, maximumValidationFailures)
    }

    /// Whether `part` may start again after `error`, given what the journal (which already holds this failure)
    /// says. Nil when it may; otherwise the error to end the update with.
    public func verdict(_ journal: LegacyJournal, part: Int, after error: LegacyDFUError) -> LegacyDFUError? {
        guard error.restartsFromZero else { return error }
        let counts = journal.restarts(of: part)
        if counts.validation >= maximumValidationFailures {
            return LegacyDFUError(.gaveUp, "gave up after \(counts.validation) failed validations; last: \(error.reason)", status: error.status)
        }
        if counts.all > maximumRestarts {
            return LegacyDFUError(.gaveUp, "gave up after \(counts.all) restarts of the image; last: \(error.reason)", status: error.status)
        }
        return nil
    }
}
