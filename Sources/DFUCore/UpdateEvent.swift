/// What an update is doing, as the updater reports it (``UpdateRun`` yields these) and as `bledfu flash --json`
/// writes them, one JSON object per line. The JSON keeps one key style (camelCase) and the shape
/// `{"event":"state","state":"<stage>",…}` / `{"event":"progress",…}` / `{"event":"warning"|"message","message":…}` /
/// `{"event":"result",…}`; docs/events.md lists every event and field. Events carry no time: the emitter adds it
/// (``UpdateEventRecord``).
public enum UpdateEvent: Sendable, Hashable {
    /// Looking for a device by advertised name (prefix).
    case scanning(name: String)
    /// Connecting to a device.
    case connecting(address: String)
    /// A scan found the device looked for (`byName`: by its advertised name, else by address).
    case found(address: String, name: String, byName: Bool)
    /// A family recognised the connected device.
    case detected(family: DFUFamilyID, mode: DetectedMode, address: String)
    /// The device's updater (a bootloader, or an application that takes images itself) is ready on this link.
    case updaterReady(family: DFUFamilyID, address: String)
    /// The device runs its application; the family will jump into the updater.
    case applicationMode(address: String, bonded: Bool)
    /// The jump request is being sent.
    case jumping(address: String, bonded: Bool)
    /// A reconnect attempt after a lost link, after `delayMilliseconds` of backoff.
    case reconnecting(attempt: Int, of: Int, delayMilliseconds: Int)
    /// A part starts uploading over this connection (`part` counts from 1).
    case uploading(part: Int, parts: Int, name: String, bytes: Int)
    /// Bytes the device confirmed.
    case progress(UpdateProgress)
    /// A part is on the device (`part` counts from 1).
    case partCompleted(part: Int, name: String)
    /// A part was skipped: the device already holds it.
    case partSkipped(part: Int, name: String, reason: String)
    /// The whole update is done.
    case completed(address: String)
    /// Something worth knowing that does not stop the update.
    case warning(String)
    /// A line for people.
    case message(String)
    /// The last line of `bledfu flash --json`, written by the command from the update's result or error.
    case result(UpdateSummary)
    /// An event this version does not know (from a newer writer): its `event` and `state` names.
    case unknown(event: String, state: String?)
}

/// How a family found a connected device.
public enum DetectedMode: String, Sendable, Hashable, Codable {
    /// Ready to take the image on this link (a bootloader; an SMP application).
    case updater
    /// Runs its application and offers a jump into the updater (buttonless).
    case application
    /// Runs its application and offers no way into the updater.
    case applicationWithoutEntry = "application-without-entry"
}

/// One progress report of a part (`part` and `object` count from 1).
public struct UpdateProgress: Sendable, Hashable, Codable {
    public var part: Int
    public var parts: Int
    /// The object (Secure DFU data object) being sent, when the family has objects.
    public var object: Int?
    public var objects: Int?
    /// Bytes of this part the device confirmed.
    public var bytes: Int
    public var total: Int
    public var percent: Int
    /// Over the last few seconds.
    public var bytesPerSecond: Int
    /// Since this connection's upload started (bytes confirmed before it excluded).
    public var averageBytesPerSecond: Int
    /// Failed checkpoints so far (this connection).
    public var retries: Int
    /// Bytes sent more than once (this connection).
    public var bytesResent: Int
    /// Estimated seconds left of this part, when the rate is known.
    public var etaSeconds: Int?

    public init(
        part: Int, parts: Int, object: Int? = nil, objects: Int? = nil, bytes: Int, total: Int, bytesPerSecond: Int = 0,
        averageBytesPerSecond: Int = 0, retries: Int = 0, bytesResent: Int = 0, etaSeconds: Int? = nil
    ) {
        self.part = part
        self.parts = parts
        self.object = object
        self.objects = objects
        self.bytes = bytes
        self.total = total
        self.percent = total > 0 ? min(100, bytes * 100 / total) : 100
        self.bytesPerSecond = bytesPerSecond
        self.averageBytesPerSecond = averageBytesPerSecond
        self.retries = retries
        self.bytesResent = bytesResent
        self.etaSeconds = etaSeconds
    }
}

/// The `result` event: how the command ended, with the update's counters.
public struct UpdateSummary: Sendable, Hashable, Codable {
    public var success: Bool
    /// The process exit status (docs/exit-codes.md).
    public var exitCode: Int?
    /// The ``DFUError/Code`` (or other coded error) that ended the update, when it failed.
    public var error: String?
    public var seconds: Double
    /// Image bytes the device confirmed in this run (bytes confirmed by earlier runs excluded).
    public var bytesSent: Int
    public var bytesResent: Int
    public var averageBytesPerSecond: Int
    /// Journal checkpoints saved.
    public var checkpoints: Int
    public var reconnects: Int
    public var partsSkipped: Int
    public var message: String?

    public init(
        success: Bool, exitCode: Int? = nil, error: String? = nil, statistics: UpdateStatistics, message: String? = nil
    ) {
        self.success = success
        self.exitCode = exitCode
        self.error = error
        self.seconds = statistics.seconds
        self.bytesSent = statistics.bytesSent
        self.bytesResent = statistics.bytesResent
        self.averageBytesPerSecond = statistics.averageBytesPerSecond
        self.checkpoints = statistics.checkpoints
        self.reconnects = statistics.reconnects
        self.partsSkipped = statistics.partsSkipped
        self.message = message
    }
}

/// The counters of one update.
public struct UpdateStatistics: Sendable, Hashable, Codable {
    /// Duration of the update on the updater's clock, in seconds (millisecond precision).
    public var seconds: Double = 0
    /// Image bytes the device confirmed in this run (bytes confirmed before it excluded).
    public var bytesSent = 0
    public var bytesResent = 0
    public var checkpoints = 0
    public var reconnects = 0
    public var partsSkipped = 0
    /// Links lost during a transfer (each a reconnect episode, or an unacknowledged last step that had not taken
    /// effect).
    public var linkLosses = 0

    public init() {}

    public var averageBytesPerSecond: Int { seconds > 0 ? Int(Double(bytesSent) / seconds) : 0 }
}

/// An event with the time the emitter saw it: `elapsed`, seconds since the command started, and `time`, the
/// wall-clock time as RFC 3339 UTC with milliseconds (`2026-11-28T04:05:06.789Z`).
public struct UpdateEventRecord: Sendable, Hashable {
    public var event: UpdateEvent
    public var elapsed: Double?
    public var time: String?

    public init(_ event: UpdateEvent, elapsed: Double? = nil, time: String? = nil) {
        self.event = event
        self.elapsed = elapsed
        self.time = time
    }
}
