import BLECore
import BledfuKit
import DFUCore
import DFUPackage
import GATT

/// One exit status of `bledfu`: its number, a stable name, what it means, which error codes end in it, and the
/// attributes the commands and the docs read (which commands end with it, whether a retry can help).
public struct ExitCodeEntry: Sendable, Hashable {
    /// Which commands end with a code.
    public struct Scope: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// `flash`, `resume` and the other commands that work on one device or file (`--help`'s table).
        public static let update = Scope(rawValue: 1 << 0)
        /// `batch` (and `batch report`, `line`): the station's own exit status (`batch --help`, docs/batch.md).
        public static let batch = Scope(rawValue: 1 << 1)
        /// A device attempt's `exit_code` in the batch log, not a command's own status.
        public static let batchAttempt = Scope(rawValue: 1 << 2)
        /// `bench batch`.
        public static let bench = Scope(rawValue: 1 << 3)
    }

    /// What a retry of the same device with the same package can do.
    public enum Retry: Sendable, Hashable {
        /// The cause may be gone next time (a lost link, a busy adapter, a device that did not answer).
        case mayHelp
        /// It fails the same way every time (the package, or the command line): `batch` does not retry it.
        case cannotHelp
    }

    public let code: Int32
    public let name: String
    public let meaning: String
    /// The errors that map to it, as `Type.code` (`DFUError.link-lost`, `AdapterError.noAdapter`,
    /// `PackageError.invalid-archive`), or a phrase for the ones that are no error value.
    public let errors: [String]
    public let scope: Scope
    public let retry: Retry
    /// A package code (docs/packages.md's table).
    public let isPackage: Bool

    public init(
        _ code: Int32, _ name: String, _ meaning: String, _ errors: [String] = [], scope: Scope = .update,
        retry: Retry = .mayHelp, package: Bool = false
    ) {
        self.code = code
        self.name = name
        self.meaning = meaning
        self.errors = errors
        self.scope = scope
        self.retry = retry
        self.isPackage = package
    }
}

/// The one registry of bledfu's exit codes. `bledfu --help`, `flash --help`, `batch --help`, the README table
/// and docs/exit-codes.md are generated from it (`bledfu exit-codes --markdown`; `tools/check-exit-codes` fails
/// when they drift). Scripts rely on these numbers: a code keeps its meaning; a new one needs a reason. Errors map
/// to codes by lookup in ``entries``, never by arithmetic.
public enum ExitCodeRegistry {
    public static let entries: [ExitCodeEntry] = [
        ExitCodeEntry(0, "success", "success (`batch`: every device is done or skipped)", scope: [.update, .batch]),
        ExitCodeEntry(
            1, "failure", "other failure (also: the `--capture` file cannot be written)",
            ["DFUError.capture", "SimulatorError.controller-unwritable", "BenchError.scratch", "BenchError.simulator-start",
             "BenchError.simulator-stopped", "BenchError.flash-start", "any error without a more specific code"]),
        ExitCodeEntry(
            10, "no-bluetooth", "this kernel has no Bluetooth support (EAFNOSUPPORT)", ["AdapterError.noBluetoothInKernel"]),
        ExitCodeEntry(11, "no-adapter", "no such Bluetooth adapter", ["AdapterError.noAdapter"]),
        ExitCodeEntry(12, "adapter-down", "the adapter is down", ["AdapterError.adapterDown"]),
        ExitCodeEntry(
            13, "permission-denied", "permission denied (scanning needs CAP_NET_RAW)", ["AdapterError.permissionDenied"]),
        ExitCodeEntry(14, "bad-address", "bad device address", ["AdapterError.badAddress"]),
        ExitCodeEntry(15, "connection-timeout", "connection timed out", ["AdapterError.connectionTimeout"]),
        ExitCodeEntry(
            16, "disconnected", "the device disconnected",
            ["AdapterError.disconnected", "ATTClientError.disconnected", "ATTClientError.closed"]),
        ExitCodeEntry(
            17, "device-not-found", "device not found", ["AdapterError.deviceNotFound", "SimulatorError.no-status", "DeviceSelectionError.not-found"]),
        ExitCodeEntry(
            18, "busy", "another program holds the ATT channel of the link to the device (EBUSY on an existing link)",
            ["AdapterError.busy"]),
        ExitCodeEntry(19, "connection-refused", "connection refused", ["AdapterError.connectionRefused"]),
        ExitCodeEntry(
            20, "att-error", "ATT/GATT error, or the device did not answer in time",
            ["ATTClientError.timeout", "ATTClientError.remote", "ATTClientError.protocolViolation",
             "ATTClientError.decoding", "ATTClientError.oversizePDU", "ATTClientError.invalidArgument"]),
        ExitCodeEntry(
            21, "no-free-link",
            "the adapter has no free link: its controller is at its connection limit (HCI 0x09/0x07/0x0D; `batch` retries the device when a link ends)",
            ["AdapterError.noFreeLink"]),
        ExitCodeEntry(
            22, "adapter-busy",
            "the adapter cannot create a connection now: its controller is busy scanning or creating another one, or the adapter advertises (retry)",
            ["AdapterError.adapterBusy"]),
        // 23: `--name` that several devices answer to; scripts tell it from a device not found (17) and rerun with
        // --device or --strongest.
        ExitCodeEntry(
            23, "ambiguous-device",
            "`--name` matches several devices (they are listed; give `--device`, or `--strongest` to take the strongest)",
            ["DeviceSelectionError.ambiguous"]),
        ExitCodeEntry(
            30, "invalid-archive", "the package is not a readable zip archive (or no family reads it)",
            ["PackageError.invalid-archive", "DFUError.invalid-package"], retry: .cannotHelp, package: true),
        ExitCodeEntry(
            31, "unsafe-entry", "a package entry name is unsafe or duplicated", ["PackageError.unsafe-entry"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            32, "entry-too-large", "a package entry is too large (or a zip bomb)", ["PackageError.entry-too-large"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            33, "corrupt-entry", "a package entry is corrupt (CRC, deflate)", ["PackageError.corrupt-entry"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            34, "invalid-manifest", "the package manifest is missing or invalid", ["PackageError.invalid-manifest"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            35, "missing-file", "the manifest names a file the package lacks", ["PackageError.missing-file"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            36, "invalid-init-packet", "an init packet does not decode", ["PackageError.invalid-init-packet"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            37, "image-mismatch", "an image does not match its init packet", ["PackageError.image-mismatch"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            38, "signature-invalid", "no given key verifies a package signature", ["PackageError.signature-invalid"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            39, "package-other", "a key file, a create input or file I/O failed (docs/packages.md)",
            ["PackageError.invalid-key", "PackageError.invalid-input", "PackageError.io", "PackageError (other codes)"],
            retry: .cannotHelp, package: true),
        ExitCodeEntry(
            40, "remote", "the device refused a DFU request (result or extended error, named)",
            ["DFUError.remote", "DFUError.already-present"]),
        ExitCodeEntry(
            41, "verification-failed", "CRC or image verification kept failing; the updater gave up",
            ["DFUError.verification-failed"]),
        ExitCodeEntry(42, "timeout", "the device stopped answering (response timeout)", ["DFUError.timeout"]),
        ExitCodeEntry(
            43, "link-lost", "the link was lost and reconnects ran out (the upload is resumable: `bledfu resume`)",
            ["DFUError.link-lost", "DFUError.transport", "DFUError.unconfirmed"]),
        ExitCodeEntry(
            44, "updater-not-found", "the bootloader (updater) was not found after the jump or a reset", ["DFUError.not-found"]),
        ExitCodeEntry(
            45, "no-dfu-service", "the device has no DFU service of a known family (or no way into it)",
            ["DFUError.no-update-service"]),
        ExitCodeEntry(
            46, "protocol-error",
            "the device broke the DFU or ATT protocol (e.g. a PDU longer than ATT_MTU), or the package does not fit the device",
            ["DFUError.protocol-violation", "DFUError.incompatible-package"]),
        // 47: a family whose device confirms an image after a reset (MCUmgr SMP test/confirm) can find the old image
        // running again; neither "refused" (40) nor "verification" (41) says that.
        ExitCodeEntry(
            47, "reverted", "after the reset the device runs its old image again (reverted)", ["DFUError.reverted"]),
        // 48: refused before anything was sent, from what the device tells (never "the device refused" (40): the
        // device still runs its application and nothing reached its bootloader). The same device refuses the same
        // package every time: no retry.
        ExitCodeEntry(
            48, "device-mismatch",
            "the device would refuse the package (another hardware version, a downgrade): checked before the jump, nothing sent, the device still runs its application",
            ["DFUError.device-mismatch"], retry: .cannotHelp),
        // 49: bledfu's own watchdog (`--stall-timeout`): no event for that long; the last thing that happened is
        // named. Never the device's fault alone (that is 42 or 43), so a retry may help.
        ExitCodeEntry(
            49, "stalled",
            "nothing happened for `--stall-timeout` seconds (no progress, step or retry): bledfu's watchdog ended the update; the upload is resumable",
            ["DFUError.stalled"]),
        ExitCodeEntry(
            50, "batch-devices-failed", "`batch`: at least one device failed (docs/batch.md)", ["BenchError.devices-failed"],
            scope: .batch),
        ExitCodeEntry(
            51, "batch-plan-invalid",
            "`batch`: the plan is invalid (its line and the reason are printed; also `connections` above what the adapter's controller carries)",
            ["PlanError.too-many-connections"], scope: .batch),
        ExitCodeEntry(
            52, "batch-line-stopped", "`batch`: the line stopped after the plan's number of failures", scope: .batch),
        ExitCodeEntry(
            53, "batch-database",
            "`batch`: the batch log could not be opened or written (also a wrong or unreachable database URL)",
            ["BatchLogError (other codes)", "BenchError.database"], scope: .batch),
        ExitCodeEntry(54, "batch-no-devices", "`batch`: no device matched the plan", scope: .batch),
        ExitCodeEntry(
            55, "bench-goal-missed", "`bench batch`: the parallel/alone ratio is above `--max-ratio`", scope: .bench),
        ExitCodeEntry(
            56, "batch-database-newer", "`batch`, `line`: the database has a newer schema version than this bledfu knows",
            ["BatchLogError.newer-schema"], scope: .batch),
        ExitCodeEntry(
            57, "batch-station-name-taken", "`batch`: a live station of the line already uses this `--station` name",
            ["BatchLogError.station-name-taken"], scope: .batch),
        ExitCodeEntry(
            58, "batch-plan-differs", "`batch`: the plan's classes or packages differ from the line's",
            ["BatchLogError.plan-differs"], scope: .batch),
        ExitCodeEntry(
            59, "flash-stalled",
            "`batch`, a device's attempt (its `exit_code` in the log): its `bledfu flash` printed nothing for `flash.stall_timeout` and was killed, or closed its output and did not exit within 10 s (retried while `policies.retries` allow)",
            scope: .batchAttempt),
        ExitCodeEntry(
            60, "batch-adapter-gone",
            "`batch`: an adapter disappeared mid-batch (unplugged: ENODEV) and devices are left pending; plug it back in and rerun",
            scope: .batch),
        ExitCodeEntry(
            61, "batch-stalled",
            "`batch`: the run itself stopped (no heartbeat and no event for its backstop's limit: no task of bledfu runs any more) and its backstop ended it; running devices keep their journals: run the same command again",
            scope: .batch),
        ExitCodeEntry(
            64, "usage", "bad arguments",
            ["argument errors", "DFUError.unknown-family", "DFUError.invalid-option", "PackageError.invalid-options",
             "SimulatorError (other codes)", "BenchError.no-firmware", "BenchError.invalid-grid"],
            retry: .cannotHelp),
        ExitCodeEntry(
            130, "interrupted", "interrupted (Ctrl-C; a stopped upload is resumable, a stopped `batch` finishes when rerun)",
            ["DFUError.stopped", "DFUError.cancelled"], scope: [.update, .batch]),
    ]

    /// `Type.code` → exit code.
    public static let byError: [String: Int32] = {
        var map: [String: Int32] = [:]
        for entry in entries {
            for error in entry.errors { map[error] = entry.code }
        }
        return map
    }()

    /// The code of the entry named `name` (every name used in the source exists: `ExitCodeRegistryTests`).
    public static func code(_ name: String) -> Int32 {
        entries.first { $0.name == name }?.code ?? failure
    }

    public static let failure: Int32 = 1

    /// The entry of exit code `code`.
    public static func entry(_ code: Int32) -> ExitCodeEntry? { entries.first { $0.code == code } }

    /// Whether retrying the same device with the same package can end otherwise (false for a package or a command
    /// line that is refused as such; an unknown code may help).
    public static func retryMayHelp(_ code: Int32) -> Bool { entry(code)?.retry != .cannotHelp }

    /// The name of exit code `code` ("failure" for a code the registry does not have).
    public static func name(of code: Int32) -> String {
        entries.first { $0.code == code }?.name ?? "failure"
    }

    public static func code(for error: AdapterError) -> Int32 { byError["AdapterError.\(error.code)"] ?? failure }

    public static func code(for error: ATTClientError) -> Int32 { byError["ATTClientError.\(error.code)"] ?? code("att-error") }

    public static func code(for error: PackageError) -> Int32 {
        byError["PackageError.\(error.code)"] ?? code("package-other")
    }

    /// Choosing a device by name: none heard, several heard, or the scan's own failure (the adapter's code).
    public static func code(for error: DeviceSelectionError) -> Int32 {
        if error.code == .scan { return (error.cause as? AdapterError).map { code(for: $0) } ?? failure }
        return byError["DeviceSelectionError.\(error.code.rawValue)"] ?? failure
    }

    public static func code(for error: BatchLogError) -> Int32 {
        byError["BatchLogError.\(error.code.rawValue)"] ?? code("batch-database")
    }

    /// An update's error: its own code, or for a connection or package failure, the cause's.
    public static func code(for error: DFUError) -> Int32 {
        switch error.code {
        case .connection:
            if let adapter = error.cause as? AdapterError { return code(for: adapter) }
            if let att = error.cause as? ATTClientError { return code(for: att) }
            return failure
        case .invalidPackage:
            if let package = error.cause as? PackageError { return code(for: package) }
        default: break
        }
        return byError["DFUError.\(error.code.rawValue)"] ?? failure
    }

    /// `  code<TAB>meaning` lines, for `--help`.
    public static func helpLines(_ codes: some Sequence<Int32>) -> String {
        let wanted = Set(codes)
        return entries.filter { wanted.contains($0.code) }.map { "  \($0.code)\t\($0.meaning)" }.joined(separator: "\n")
    }

    /// The README's table (code | meaning).
    public static var readmeTable: String {
        (["| code | meaning |", "|---|---|"] + entries.map { "| \($0.code) | \($0.meaning) |" }).joined(separator: "\n")
    }

    /// docs/batch.md's table: the codes `batch` ends with, and a device attempt's own (code | name | meaning).
    public static var batchTable: String {
        let rows = entries.filter { !$0.scope.isDisjoint(with: [.batch, .batchAttempt]) }.map { entry in
            let meaning = entry.scope == .batchAttempt ? "not the batch's own code: \(entry.meaning)" : entry.meaning
            return "| \(entry.code) | `\(entry.name)` | \(meaning) |"
        }
        return (["| code | name | meaning |", "|---|---|---|"] + rows).joined(separator: "\n")
    }

    /// docs/packages.md's table: the package codes (code | name | meaning | errors).
    public static var packageTable: String { table(entries.filter(\.isPackage)) }

    /// docs/exit-codes.md's table (code | name | meaning | errors).
    public static var docsTable: String { table(entries) }

    private static func table(_ entries: [ExitCodeEntry]) -> String {
        let rows = entries.map { entry in
            let errors = entry.errors.map { $0.contains(".") ? "`\($0)`" : $0 }.joined(separator: ", ")
            return "| \(entry.code) | `\(entry.name)` | \(entry.meaning) | \(errors) |"
        }
        return (["| code | name | meaning | errors that end in it |", "|---|---|---|---|"] + rows).joined(separator: "\n")
    }
}
