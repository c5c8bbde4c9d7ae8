import BLECore
import DFUCore

/// bledfu's exit codes by name, from ``ExitCodeRegistry`` (README.md "Exit codes", docs/exit-codes.md,
/// `bledfu --help`); scripts may rely on them.
public enum BledfuExit {
    public static let success = ExitCodeRegistry.code("success")
    /// A failure with no more specific code.
    public static let failure = ExitCodeRegistry.code("failure")
    /// Bad arguments (ArgumentParser's validation failure).
    public static let usage = ExitCodeRegistry.code("usage")
    public static let noBluetoothInKernel = ExitCodeRegistry.code("no-bluetooth")
    public static let noAdapter = ExitCodeRegistry.code("no-adapter")
    public static let adapterDown = ExitCodeRegistry.code("adapter-down")
    public static let permissionDenied = ExitCodeRegistry.code("permission-denied")
    public static let badAddress = ExitCodeRegistry.code("bad-address")
    public static let connectionTimeout = ExitCodeRegistry.code("connection-timeout")
    public static let disconnected = ExitCodeRegistry.code("disconnected")
    public static let deviceNotFound = ExitCodeRegistry.code("device-not-found")
    public static let busy = ExitCodeRegistry.code("busy")
    public static let connectionRefused = ExitCodeRegistry.code("connection-refused")
    /// The peer broke the ATT protocol, answered with an ATT error, or did not answer in time.
    public static let protocolError = ExitCodeRegistry.code("att-error")
    /// The adapter has no free link (its controller is at its connection limit); `batch` retries the device later.
    public static let noFreeLink = ExitCodeRegistry.code("no-free-link")
    /// The adapter cannot create a connection right now (controller busy scanning or creating another one).
    public static let adapterBusy = ExitCodeRegistry.code("adapter-busy")
    /// `--name` matches several devices (and no `--strongest`).
    public static let ambiguousDevice = ExitCodeRegistry.code("ambiguous-device")
    /// The first package code (30-39: docs/packages.md).
    public static let packageInvalid = ExitCodeRegistry.code("invalid-archive")
    /// The first DFU code (40-49: docs/engine.md).
    public static let dfuFailed = ExitCodeRegistry.code("remote")
    /// Stopped by Ctrl-C (SIGINT) at a safe point.
    public static let interrupted = ExitCodeRegistry.code("interrupted")

    /// Every code and its meaning, as `bledfu --help` prints them.
    public static let table: [(Int32, String)] = ExitCodeRegistry.entries.map { ($0.code, $0.meaning) }

    public static var helpText: String {
        "Exit codes:\n" + ExitCodeRegistry.helpLines(ExitCodeRegistry.entries.map(\.code))
    }

    public static func code(for error: AdapterError) -> Int32 { ExitCodeRegistry.code(for: error) }
}

/// `bledfu flash` exit codes in the DFU range (40-49), by name from ``ExitCodeRegistry``.
public enum FlashExit {
    public static let remoteError = ExitCodeRegistry.code("remote")
    public static let verificationFailed = ExitCodeRegistry.code("verification-failed")
    public static let timeout = ExitCodeRegistry.code("timeout")
    public static let linkLost = ExitCodeRegistry.code("link-lost")
    public static let bootloaderNotFound = ExitCodeRegistry.code("updater-not-found")
    public static let noDFUService = ExitCodeRegistry.code("no-dfu-service")
    public static let protocolError = ExitCodeRegistry.code("protocol-error")
    public static let reverted = ExitCodeRegistry.code("reverted")
    public static let stalled = ExitCodeRegistry.code("stalled")

    /// The codes `flash` and `resume` end with.
    public static let codes: [Int32] = ExitCodeRegistry.entries.filter { $0.scope.contains(.update) }.map(\.code)

    public static var helpText: String { "Exit codes:\n" + ExitCodeRegistry.helpLines(codes) }

    /// The exit code of an update's error.
    public static func code(for error: DFUError) -> Int32 { ExitCodeRegistry.code(for: error) }
}

/// `bledfu batch` exit codes (the registry's entries of scope `batch`), documented in docs/batch.md. 0 means every device is done or skipped.
public enum BatchExit {
    /// The run finished and at least one device failed (see `bledfu batch report`).
    public static let devicesFailed = ExitCodeRegistry.code("batch-devices-failed")
    /// The plan was rejected before anything connected (the message names the line).
    public static let planInvalid = ExitCodeRegistry.code("batch-plan-invalid")
    /// The line stopped after `stop_after_failures` failed devices; the rest stay pending.
    public static let lineStopped = ExitCodeRegistry.code("batch-line-stopped")
    /// The database could not be opened or written.
    public static let databaseError = ExitCodeRegistry.code("batch-database")
    /// The plan's discovery found no device and the plan lists none.
    public static let noDevices = ExitCodeRegistry.code("batch-no-devices")
    /// `bench batch`: the parallel run took longer than `--max-ratio` times the single run.
    public static let benchGoalMissed = ExitCodeRegistry.code("bench-goal-missed")
    /// The database has a newer schema version than this bledfu knows (update bledfu).
    public static let databaseNewer = ExitCodeRegistry.code("batch-database-newer")
    /// A live station of the line already uses this station name.
    public static let stationNameTaken = ExitCodeRegistry.code("batch-station-name-taken")
    /// The plan's classes or packages differ from those of the line's live stations.
    public static let planDiffers = ExitCodeRegistry.code("batch-plan-differs")
    /// A device's attempt (its `exit_code` in the database, not the batch's): its `bledfu flash` printed nothing for
    /// `flash.stall_timeout` and was killed; the attempt is retried like a lost link (the journal resumes it).
    public static let flashStalled = ExitCodeRegistry.code("flash-stalled")
    /// An adapter disappeared mid-batch (USB pulled, ENODEV; a virtual radio's directory removed) and devices are
    /// left pending with no adapter to run them.
    public static let adapterGone = ExitCodeRegistry.code("batch-adapter-gone")
    /// The run itself stopped (no heartbeat, no event) and its backstop ended it (``BatchBackstop``).
    public static let stalled = ExitCodeRegistry.code("batch-stalled")

    /// The codes `batch` ends with (and a device attempt's own), as the registry words them.
    public static let table: [(Int32, String)] = ExitCodeRegistry.entries
        .filter { !$0.scope.isDisjoint(with: [.batch, .batchAttempt]) }
        .map { ($0.code, $0.meaning) }

    public static var helpText: String { "Exit codes:\n" + table.map { "  \($0.0)\t\($0.1)" }.joined(separator: "\n") }
}

