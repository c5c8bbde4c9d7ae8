import MCUmgr

/// A device that lies, for the host's tests: from `afterBytes` upload bytes on, upload answers are altered.
public enum SMPDeviceLie: String, Codable, Sendable, Hashable, CaseIterable {
    /// Answers an offset below the one it already confirmed (not 0).
    case offsetBackwards = "offset-backwards"
    /// Answers an offset past the image's end.
    case offsetPastEnd = "offset-past-end"
    /// Answers with another sequence number.
    case wrongSequence = "wrong-sequence"
    /// Answers a generic error code instead of the offset.
    case wrongReturnCode = "wrong-rc"
    /// Answers another group and command.
    case wrongCommand = "wrong-command"
    /// Reports `match: true` but stores the image with one byte changed (the host must check the hash it runs).
    case corruptImage = "corrupt-image"
}

/// SMP-specific faults next to the simulator's ``FaultPlan`` (which gives seed, `disconnect-after-bytes`,
/// `power-loss-after-bytes`, `stall-…`, `drop-rate`, `disconnect-rate`, counted on upload data bytes).
public struct SMPFaults: Codable, Sendable, Hashable {
    public var plan: FaultPlan
    public var lie: SMPDeviceLie?
    /// Upload data bytes after which `lie` starts.
    public var lieAfterBytes: Int
    /// A new image that crashes at its first start (watchdog reset before it can be confirmed): MCUboot reverts.
    public var crashNewImage: Bool

    public init(plan: FaultPlan = .none, lie: SMPDeviceLie? = nil, lieAfterBytes: Int = 0, crashNewImage: Bool = false) {
        self.plan = plan
        self.lie = lie
        self.lieAfterBytes = lieAfterBytes
        self.crashNewImage = crashNewImage
    }

    public static let none = SMPFaults()
}

/// Counters of a virtual SMP device.
public struct SMPDeviceCounters: Codable, Sendable, Hashable {
    /// Upload data bytes written to flash (duplicates included).
    public var uploadBytesWritten = 0
    /// Upload data bytes received in chunks (written or not).
    public var uploadBytesReceived = 0
    public var requests = 0
    /// Requests lost because no buffer was free (Zephyr #44536: no answer at all).
    public var requestsDropped = 0
    /// Responses lost because no buffer was free for them (Zephyr #44898).
    public var responsesDropped = 0
    public var resets = 0
    public var swaps = 0
    public var faults: [String] = []
    public init() {}
}

/// What survives a power cycle: the slots and their trailers.
public struct SMPDevicePersistentState: Codable, Sendable, Hashable {
    public var pairs: [MCUbootImagePair]
    public init(pairs: [MCUbootImagePair]) { self.pairs = pairs }
}

/// A snapshot of everything observable (`bledfu simulate status`).
public struct SMPDeviceState: Codable, Sendable, Hashable {
    public var family = "smp"
    public var name: String
    public var address: String
    public var connected: Bool
    /// False while the device resets, swaps or boots.
    public var available: Bool
    public var images: [SMPImageSlot]
    public var upload: SMPUploadState?
    public var lastBoot: String?
    public var counters: SMPDeviceCounters
}
