import ArgumentParser
import BLECore
import DFUCore
import DFUPackage
import GATT

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

    static func code(for error: AdapterError) -> Int32 { ExitCodeRegistry.code(for: error) }
}

/// An error the CLI reports as one line with its exit code. Its ``code`` is the exit code's name in
/// ``ExitCodeRegistry`` ("no-adapter", "usage").
public struct CLIError: CodedError, Sendable {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
    }

    public var code: Code { Code(rawValue: ExitCodeRegistry.name(of: exitCode)) }
    public var message: String
    public var exitCode: Int32

    public init(_ message: String, exitCode: Int32) {
        self.message = message
        self.exitCode = exitCode
    }

    public init(_ error: AdapterError) {
        self.init(error.reason, exitCode: BledfuExit.code(for: error))
    }

    public var description: String { message }
}

/// `bledfu flash` exit codes in the DFU range (40-49), by name from ``ExitCodeRegistry``.
enum FlashExit {
    static let remoteError = ExitCodeRegistry.code("remote")
    static let verificationFailed = ExitCodeRegistry.code("verification-failed")
    static let timeout = ExitCodeRegistry.code("timeout")
    static let linkLost = ExitCodeRegistry.code("link-lost")
    static let bootloaderNotFound = ExitCodeRegistry.code("updater-not-found")
    static let noDFUService = ExitCodeRegistry.code("no-dfu-service")
    static let protocolError = ExitCodeRegistry.code("protocol-error")
    static let reverted = ExitCodeRegistry.code("reverted")

    /// The codes `flash` and `resume` end with.
    static let codes: [Int32] = ExitCodeRegistry.entries.filter { $0.scope.contains(.update) }.map(\.code)

    static var helpText: String { "Exit codes:\n" + ExitCodeRegistry.helpLines(codes) }

    /// The exit code of an update's error.
    static func code(for error: DFUError) -> Int32 { ExitCodeRegistry.code(for: error) }
}
