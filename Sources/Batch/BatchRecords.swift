/// A device's status in a batch (`devices.status`).
public enum DeviceStatus: String, Sendable, Codable, CaseIterable {
    /// Known to the batch, not finished: never tried, waiting for a retry, or left by a stopped line.
    case pending
    /// An attempt is under way (after a crash: the attempt was cut off).
    case running
    /// Flashed; the device runs the package.
    case done
    /// Not flashed: it already runs the target version (or newer).
    case skipped
    /// Every attempt failed; `error` holds the last cause.
    case failed

    public var isFinal: Bool { self == .done || self == .skipped || self == .failed }
}

/// How one attempt ended (`attempts.result`).
public enum AttemptResult: String, Sendable, Codable {
    case running, done, skipped, failed
    /// The process stopped during the attempt (found open by the next run).
    case interrupted
}

/// One row of `devices`: the final status of a device in a batch.
public struct DeviceRecord: Sendable, Equatable, Codable {
    /// What enrolling a device needs.
    public struct Identity: Sendable, Equatable {
        public var address: String
        public var addressType: String
        public var name: String?
        public var className: String
        public var packagePath: String
        public var packageSHA256: String
        public var targetVersion: UInt32?

        public init(
            address: String, addressType: String, name: String?, className: String, packagePath: String,
            packageSHA256: String, targetVersion: UInt32?
        ) {
            self.address = address
            self.addressType = addressType
            self.name = name
            self.className = className
            self.packagePath = packagePath
            self.packageSHA256 = packageSHA256
            self.targetVersion = targetVersion
        }
    }

    public var batch: String
    public var address: String
    public var addressType: String
    public var name: String?
    public var className: String
    public var packagePath: String
    public var packageSHA256: String
    public var targetVersion: UInt32?
    public var versionBefore: UInt32?
    public var versionAfter: UInt32?
    public var status: DeviceStatus
    public var error: String?
    public var exitCode: Int32?
    public var attempts: Int
    /// Attempts in the current round (the retry policy counts these; a new run of a line alone resets them).
    public var tries: Int
    /// Seconds over all attempts.
    public var duration: Double
    public var bytes: Int
    public var resends: Int
    public var adapter: String?
    public var updatedAt: String
    /// The station that holds the claim, or that wrote the final status.
    public var station: String?
    /// While running: what the device's flash does and its bytes so far (the station's heartbeat writes them).
    public var stage: String?
    public var progressBytes: Int
    public var progressTotal: Int
    /// When the final status was written.
    public var finishedAt: String?

    init(row: SQLRow) {
        batch = row.string("batch") ?? ""
        address = row.string("address") ?? ""
        addressType = row.string("address_type") ?? "random"
        name = row.string("name")
        className = row.string("class") ?? ""
        packagePath = row.string("package_path") ?? ""
        packageSHA256 = row.string("package_sha256") ?? ""
        targetVersion = row.uint32("target_version")
        versionBefore = row.uint32("version_before")
        versionAfter = row.uint32("version_after")
        status = DeviceStatus(rawValue: row.string("status") ?? "") ?? .pending
        error = row.string("error")
        exitCode = row.int64("exit_code").flatMap { Int32(exactly: $0) }
        attempts = row.int("attempts") ?? 0
        tries = row.int("tries") ?? 0
        duration = row.double("duration") ?? 0
        bytes = row.int("bytes") ?? 0
        resends = row.int("resends") ?? 0
        adapter = row.string("adapter")
        updatedAt = row.string("updated_at") ?? ""
        station = row.string("station")
        stage = row.string("stage")
        progressBytes = row.int("progress_bytes") ?? 0
        progressTotal = row.int("progress_total") ?? 0
        finishedAt = row.string("finished_at")
    }

    public var identity: Identity {
        Identity(
            address: address, addressType: addressType, name: name, className: className, packagePath: packagePath,
            packageSHA256: packageSHA256, targetVersion: targetVersion)
    }
}

/// One row of `attempts`.
public struct AttemptRecord: Sendable, Equatable, Codable {
    public var id: Int64
    public var run: Int64
    public var batch: String
    public var address: String
    public var number: Int
    public var name: String?
    public var adapter: String
    public var packageSHA256: String
    public var versionBefore: UInt32?
    public var versionAfter: UInt32?
    public var startedAt: String
    public var finishedAt: String?
    public var result: AttemptResult
    public var error: String?
    public var exitCode: Int32?
    public var duration: Double?
    public var bytes: Int
    public var resends: Int
    /// The station that made the attempt (nil in a log from before stations).
    public var station: String?

    init(row: SQLRow) {
        id = row.int64("id") ?? 0
        run = row.int64("run_id") ?? 0
        batch = row.string("batch") ?? ""
        address = row.string("address") ?? ""
        number = row.int("number") ?? 0
        name = row.string("name")
        adapter = row.string("adapter") ?? ""
        packageSHA256 = row.string("package_sha256") ?? ""
        versionBefore = row.uint32("version_before")
        versionAfter = row.uint32("version_after")
        startedAt = row.string("started_at") ?? ""
        finishedAt = row.string("finished_at")
        result = AttemptResult(rawValue: row.string("result") ?? "") ?? .running
        error = row.string("error")
        exitCode = row.int64("exit_code").flatMap { Int32(exactly: $0) }
        duration = row.double("duration")
        bytes = row.int("bytes") ?? 0
        resends = row.int("resends") ?? 0
        station = row.string("station")
    }
}

/// What an attempt produced, as the log stores it.
public struct AttemptOutcome: Sendable, Equatable {
    public var result: AttemptResult
    public var error: String?
    public var exitCode: Int32?
    public var duration: Double
    public var bytes: Int
    public var resends: Int
    public var versionBefore: UInt32?
    public var versionAfter: UInt32?
    public var name: String?

    public init(
        result: AttemptResult, error: String? = nil, exitCode: Int32? = nil, duration: Double = 0, bytes: Int = 0,
        resends: Int = 0, versionBefore: UInt32? = nil, versionAfter: UInt32? = nil, name: String? = nil
    ) {
        self.result = result
        self.error = error
        self.exitCode = exitCode
        self.duration = duration
        self.bytes = bytes
        self.resends = resends
        self.versionBefore = versionBefore
        self.versionAfter = versionAfter
        self.name = name
    }
}
