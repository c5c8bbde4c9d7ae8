import GRDB

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
    /// Seconds over all attempts.
    public var duration: Double
    public var bytes: Int
    public var resends: Int
    public var adapter: String?
    public var updatedAt: String

    init(row: Row) {
        batch = row["batch"] ?? ""
        address = row["address"] ?? ""
        addressType = row["address_type"] ?? "random"
        name = row["name"]
        className = row["class"] ?? ""
        packagePath = row["package_path"] ?? ""
        packageSHA256 = row["package_sha256"] ?? ""
        targetVersion = (row["target_version"] as Int64?).flatMap { UInt32(exactly: $0) }
        versionBefore = (row["version_before"] as Int64?).flatMap { UInt32(exactly: $0) }
        versionAfter = (row["version_after"] as Int64?).flatMap { UInt32(exactly: $0) }
        status = DeviceStatus(rawValue: row["status"] ?? "") ?? .pending
        error = row["error"]
        exitCode = (row["exit_code"] as Int64?).flatMap { Int32(exactly: $0) }
        attempts = row["attempts"] ?? 0
        duration = row["duration"] ?? 0
        bytes = row["bytes"] ?? 0
        resends = row["resends"] ?? 0
        adapter = row["adapter"]
        updatedAt = row["updated_at"] ?? ""
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

    init(row: Row) {
        id = row["id"] ?? 0
        run = row["run_id"] ?? 0
        batch = row["batch"] ?? ""
        address = row["address"] ?? ""
        number = row["number"] ?? 0
        name = row["name"]
        adapter = row["adapter"] ?? ""
        packageSHA256 = row["package_sha256"] ?? ""
        versionBefore = (row["version_before"] as Int64?).flatMap { UInt32(exactly: $0) }
        versionAfter = (row["version_after"] as Int64?).flatMap { UInt32(exactly: $0) }
        startedAt = row["started_at"] ?? ""
        finishedAt = row["finished_at"]
        result = AttemptResult(rawValue: row["result"] ?? "") ?? .running
        error = row["error"]
        exitCode = (row["exit_code"] as Int64?).flatMap { Int32(exactly: $0) }
        duration = row["duration"]
        bytes = row["bytes"] ?? 0
        resends = row["resends"] ?? 0
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
