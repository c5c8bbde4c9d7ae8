import BLECore

/// A package as the line needs it: where it is, its identity, the version it installs and its size.
public struct PackageInfo: Sendable, Equatable {
    public var path: String
    /// Lowercase hex SHA-256 of the package file.
    public var sha256: String
    /// The application's `fw_version` (nil when the package has no application).
    public var targetVersion: UInt32?
    /// Image bytes over all parts.
    public var totalBytes: Int

    public init(path: String, sha256: String, targetVersion: UInt32?, totalBytes: Int) {
        self.path = path
        self.sha256 = sha256
        self.targetVersion = targetVersion
        self.totalBytes = totalBytes
    }
}

/// What a short look at a device found (connect, read the Device Information Firmware Revision, check FE59).
public struct DeviceProbe: Sendable, Equatable {
    public enum Mode: String, Sendable, Equatable {
        /// The application answered (with or without buttonless DFU).
        case application
        /// The DFU bootloader answered (an earlier update was cut off).
        case bootloader
        /// No connection: the device may still wait in its bootloader under another address.
        case unreachable
    }

    public var mode: Mode
    /// The application's version (Firmware Revision string 0x2A26 as a decimal number).
    public var applicationVersion: UInt32?
    public var name: String?
    /// Why the probe could not connect.
    public var error: String?
    /// The probe got no link because the adapter had none to give (not the device's doing).
    public var backPressure: BackPressure?
    /// The exit code `bledfu flash` gives the probe's failure (docs/exit-codes.md), when known.
    public var exitCode: Int32?

    public init(
        mode: Mode, applicationVersion: UInt32? = nil, name: String? = nil, error: String? = nil,
        backPressure: BackPressure? = nil
    ) {
        self.mode = mode
        self.applicationVersion = applicationVersion
        self.name = name
        self.error = error
        self.backPressure = backPressure
    }
}

/// One device's upload as the flasher gets it.
public struct FlashJob: Sendable, Equatable {
    public var target: BatchTarget
    public var package: PackageInfo
    public var adapter: BatchPlan.Adapter
    /// 1 for the first attempt in this database.
    public var attempt: Int
    /// The name the bootloader should advertise after the jump (unique in the line), nil for the device's default.
    public var bootloaderName: String?
    public var options: BatchPlan.FlashOptions

    public init(
        target: BatchTarget, package: PackageInfo, adapter: BatchPlan.Adapter, attempt: Int, bootloaderName: String?,
        options: BatchPlan.FlashOptions
    ) {
        self.target = target
        self.package = package
        self.adapter = adapter
        self.attempt = attempt
        self.bootloaderName = bootloaderName
        self.options = options
    }
}

/// Progress of one device's upload.
public struct DeviceProgress: Sendable, Equatable {
    /// What the flash is doing: connecting, jumping, uploading, verifying…
    public var stage: String
    public var bytes: Int
    public var total: Int
    public var part: Int
    public var parts: Int

    public init(stage: String, bytes: Int = 0, total: Int = 0, part: Int = 1, parts: Int = 1) {
        self.stage = stage
        self.bytes = bytes
        self.total = total
        self.part = part
        self.parts = parts
    }

    public var percent: Int { total > 0 ? min(100, bytes * 100 / total) : 0 }
}

/// How one upload ended.
public struct FlashOutcome: Sendable, Equatable {
    public var success: Bool
    /// The cause, in words, when it failed.
    public var error: String?
    /// `bledfu flash`'s exit code (docs/engine.md), when known.
    public var exitCode: Int32?
    /// Image bytes sent in this attempt (resumed bytes excluded) and bytes sent again.
    public var bytes: Int
    public var resends: Int
    /// False when trying again cannot help (a package the device rejects for good).
    public var retryable: Bool
    /// The flash stopped at a safe point because it was asked to (Ctrl-C): the device stays pending.
    public var interrupted = false
    /// The adapter could not take the link now (its controller full, or busy creating another connection): not the
    /// device's failure. The device keeps its place and is tried again when a link frees (docs/batch.md).
    public var backPressure: BackPressure?

    public init(success: Bool, error: String? = nil, exitCode: Int32? = nil, bytes: Int = 0, resends: Int = 0, retryable: Bool = true) {
        self.success = success
        self.error = error
        self.exitCode = exitCode
        self.bytes = bytes
        self.resends = resends
        self.retryable = retryable
    }
}

/// Why an adapter could not take one more link (many-links.md §2.2, §2.4): the line's back-pressure.
public enum BackPressure: String, Sendable, Equatable {
    /// The controller is at its connection limit (HCI 0x09/0x07/0x0D; `bledfu flash` exit 21, `no-free-link`).
    case noFreeLink = "no-free-link"
    /// The adapter cannot create a connection now (scanning, creating another, advertising; exit 22, `adapter-busy`).
    case adapterBusy = "adapter-busy"
    /// The adapter is gone (unplugged: ENODEV; a virtual radio's directory removed): no device starts on it again in
    /// this run; its devices stay pending for the other adapters or the next run (`batch` exit 60 when none is left).
    case adapterGone = "adapter-gone"
}

/// The per-device work the line injects: the CLI implements it with the full `bledfu flash` engine (buttonless
/// jump, multi-part, resume, journal); tests use fakes. Calls for different devices run concurrently and must not
/// affect each other.
public protocol DeviceFlasher: Sendable {
    /// A short look at the device: mode and application version. Never throws: an unreachable device is a result.
    /// `afterUpdate`: the device is resetting into its new application; wait for it a little.
    func probe(_ target: BatchTarget, adapter: BatchPlan.Adapter, options: BatchPlan.FlashOptions, afterUpdate: Bool) async
        -> DeviceProbe
    /// The whole update of one device. `progress` may be called from any task.
    func flash(_ job: FlashJob, progress: @escaping @Sendable (DeviceProgress) -> Void) async -> FlashOutcome
    /// Whether the adapter still exists (asked after an attempt failed: a USB adapter pulled mid-batch, a virtual
    /// radio's directory removed). Default: true.
    func adapterPresent(_ adapter: BatchPlan.Adapter) async -> Bool
}

extension DeviceFlasher {
    public func adapterPresent(_ adapter: BatchPlan.Adapter) async -> Bool { true }
}
