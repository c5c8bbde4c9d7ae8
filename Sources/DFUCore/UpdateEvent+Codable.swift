/// The JSON form of ``UpdateEvent``: one flat object per event (docs/events.md).
///
///     {"event":"state","state":"connecting","address":"C0:FF:EE:00:00:01"}
///     {"event":"state","state":"uploading","part":1,"parts":2,"name":"softdevice+bootloader","bytes":152392}
///     {"event":"progress","part":1,"parts":2,"object":3,"objects":38,"bytes":12288,"total":152392,"percent":8,…}
///     {"event":"warning","message":"application: the device disconnected; reconnecting"}
///     {"event":"result","success":true,"exitCode":0,"seconds":12.5,"bytesSent":152392,…}
extension UpdateEvent: Codable {
    public init(from decoder: any Decoder) throws {
        self = try EventFields(from: decoder).decoded
    }

    public func encode(to encoder: any Encoder) throws {
        try EventFields(self).encode(to: encoder)
    }
}

extension UpdateEvent {
    /// The `state` name of a state event as the JSON carries it ("connecting", "bootloader", "uploading"); nil for
    /// progress, warnings, messages and results.
    public var stateName: String? { EventFields(self).state }
}

extension UpdateEventRecord: Codable {
    public init(from decoder: any Decoder) throws {
        let fields = try EventFields(from: decoder)
        self.init(fields.decoded, elapsed: fields.elapsed, time: fields.time)
    }

    public func encode(to encoder: any Encoder) throws {
        var fields = EventFields(event)
        fields.elapsed = elapsed
        fields.time = time
        try fields.encode(to: encoder)
    }
}

/// Every key any event uses; absent keys are left out of the JSON.
struct EventFields: Codable {
    var event: String
    var state: String?
    var elapsed: Double?
    var time: String?
    var address: String?
    var name: String?
    var by: String?
    var bonded: Bool?
    var family: DFUFamilyID?
    var mode: DetectedMode?
    var attempt: Int?
    var of: Int?
    var delayMs: Int?
    var part: Int?
    var parts: Int?
    var bytes: Int?
    var reason: String?
    var message: String?
    // progress
    var object: Int?
    var objects: Int?
    var total: Int?
    var percent: Int?
    var bytesPerSecond: Int?
    var averageBytesPerSecond: Int?
    var retries: Int?
    var bytesResent: Int?
    var etaSeconds: Int?
    // result
    var success: Bool?
    var exitCode: Int?
    var error: String?
    var seconds: Double?
    var bytesSent: Int?
    var checkpoints: Int?
    var reconnects: Int?
    var partsSkipped: Int?

    init(event: String, state: String? = nil) {
        self.event = event
        self.state = state
    }

    // The state names are the ones `bledfu flash --json` has always written ("bootloader", "application-mode").
    init(_ event: UpdateEvent) {
        switch event {
        case .scanning(let name):
            self.init(event: "state", state: "scanning")
            self.name = name
        case .connecting(let address):
            self.init(event: "state", state: "connecting")
            self.address = address
        case .found(let address, let name, let byName):
            self.init(event: "state", state: "found")
            (self.address, self.name, self.by) = (address, name, byName ? "name" : "address")
        case .detected(let family, let mode, let address):
            self.init(event: "state", state: "detected")
            (self.family, self.mode, self.address) = (family, mode, address)
        case .updaterReady(let family, let address):
            self.init(event: "state", state: "bootloader")
            (self.family, self.address) = (family, address)
        case .applicationMode(let address, let bonded):
            self.init(event: "state", state: "application-mode")
            (self.address, self.bonded) = (address, bonded)
        case .jumping(let address, let bonded):
            self.init(event: "state", state: "jumping")
            (self.address, self.bonded) = (address, bonded)
        case .reconnecting(let attempt, let of, let delay):
            self.init(event: "state", state: "reconnecting")
            (self.attempt, self.of, self.delayMs) = (attempt, of, delay)
        case .uploading(let part, let parts, let name, let bytes):
            self.init(event: "state", state: "uploading")
            (self.part, self.parts, self.name, self.bytes) = (part, parts, name, bytes)
        case .progress(let progress):
            self.init(progress: progress)
        case .partCompleted(let part, let name):
            self.init(event: "state", state: "part-completed")
            (self.part, self.name) = (part, name)
        case .partSkipped(let part, let name, let reason):
            self.init(event: "state", state: "part-skipped")
            (self.part, self.name, self.reason) = (part, name, reason)
        case .completed(let address):
            self.init(event: "state", state: "completed")
            self.address = address
        case .warning(let text):
            self.init(event: "warning")
            message = text
        case .message(let text):
            self.init(event: "message")
            message = text
        case .result(let summary):
            self.init(summary: summary)
        case .unknown(let event, let state):
            self.init(event: event, state: state)
        }
    }

    init(progress p: UpdateProgress) {
        self.init(event: "progress")
        (part, parts, object, objects, bytes, total, percent) = (p.part, p.parts, p.object, p.objects, p.bytes, p.total, p.percent)
        (bytesPerSecond, averageBytesPerSecond, retries, bytesResent, etaSeconds) =
            (p.bytesPerSecond, p.averageBytesPerSecond, p.retries, p.bytesResent, p.etaSeconds)
    }

    init(summary s: UpdateSummary) {
        self.init(event: "result")
        (success, exitCode, error, seconds, bytesSent, bytesResent) = (s.success, s.exitCode, s.error, s.seconds, s.bytesSent, s.bytesResent)
        (averageBytesPerSecond, checkpoints, reconnects, partsSkipped, message) =
            (s.averageBytesPerSecond, s.checkpoints, s.reconnects, s.partsSkipped, s.message)
    }

    var decoded: UpdateEvent {
        switch (event, state) {
        case ("state", "scanning"?): return .scanning(name: name ?? "")
        case ("state", "connecting"?): return .connecting(address: address ?? "")
        case ("state", "found"?): return .found(address: address ?? "", name: name ?? "", byName: by == "name")
        case ("state", "detected"?):
            return .detected(family: family ?? DFUFamilyID(""), mode: mode ?? .updater, address: address ?? "")
        case ("state", "bootloader"?): return .updaterReady(family: family ?? .secure, address: address ?? "")
        case ("state", "application-mode"?): return .applicationMode(address: address ?? "", bonded: bonded ?? false)
        case ("state", "jumping"?): return .jumping(address: address ?? "", bonded: bonded ?? false)
        case ("state", "reconnecting"?):
            return .reconnecting(attempt: attempt ?? 0, of: of ?? 0, delayMilliseconds: delayMs ?? 0)
        case ("state", "uploading"?): return .uploading(part: part ?? 1, parts: parts ?? 1, name: name ?? "", bytes: bytes ?? 0)
        case ("state", "part-completed"?): return .partCompleted(part: part ?? 1, name: name ?? "")
        case ("state", "part-skipped"?): return .partSkipped(part: part ?? 1, name: name ?? "", reason: reason ?? "")
        case ("state", "completed"?): return .completed(address: address ?? "")
        case ("progress", _): return .progress(progressValue)
        case ("warning", _): return .warning(message ?? "")
        case ("message", _): return .message(message ?? "")
        case ("result", _): return .result(summaryValue)
        default: return .unknown(event: event, state: state)
        }
    }

    var progressValue: UpdateProgress {
        var progress = UpdateProgress(
            part: part ?? 1, parts: parts ?? 1, object: object, objects: objects, bytes: bytes ?? 0, total: total ?? 0,
            bytesPerSecond: bytesPerSecond ?? 0, averageBytesPerSecond: averageBytesPerSecond ?? 0, retries: retries ?? 0,
            bytesResent: bytesResent ?? 0, etaSeconds: etaSeconds)
        if let percent { progress.percent = percent }
        return progress
    }

    var summaryValue: UpdateSummary {
        var statistics = UpdateStatistics()
        statistics.seconds = seconds ?? 0
        statistics.bytesSent = bytesSent ?? 0
        statistics.bytesResent = bytesResent ?? 0
        statistics.checkpoints = checkpoints ?? 0
        statistics.reconnects = reconnects ?? 0
        statistics.partsSkipped = partsSkipped ?? 0
        var summary = UpdateSummary(
            success: success ?? false, exitCode: exitCode, error: error, statistics: statistics, message: message)
        if let averageBytesPerSecond { summary.averageBytesPerSecond = averageBytesPerSecond }
        return summary
    }
}
