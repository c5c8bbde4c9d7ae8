import ArgumentParser
import BLECore
import DFUCore
import DFUPackage
import GATT

/// bledfu's exit codes. Documented in README.md ("Exit codes") and `bledfu --help`; scripts may rely on them.
public enum BledfuExit {
    public static let success: Int32 = 0
    /// A failure with no more specific code.
    public static let failure: Int32 = 1
    /// Bad arguments (ArgumentParser's validation failure).
    public static let usage: Int32 = 64

    // Link and adapter (10-19).
    public static let noBluetoothInKernel: Int32 = 10
    public static let noAdapter: Int32 = 11
    public static let adapterDown: Int32 = 12
    public static let permissionDenied: Int32 = 13
    public static let badAddress: Int32 = 14
    public static let connectionTimeout: Int32 = 15
    public static let disconnected: Int32 = 16
    public static let deviceNotFound: Int32 = 17
    public static let busy: Int32 = 18
    public static let connectionRefused: Int32 = 19
    /// The peer broke the ATT protocol, answered with an ATT error, or did not answer in time.
    public static let protocolError: Int32 = 20
    /// The adapter has no free link (its controller is at its connection limit); `batch` retries the device later.
    public static let noFreeLink: Int32 = 21
    /// The adapter cannot create a connection right now (controller busy scanning or creating another one).
    public static let adapterBusy: Int32 = 22

    // Packages (30-39): see docs/packages.md.
    public static let packageInvalid: Int32 = 30

    // DFU (40-49): see docs/engine.md.
    public static let dfuFailed: Int32 = 40

    /// Stopped by Ctrl-C (SIGINT) at a safe point.
    public static let interrupted: Int32 = 130

    /// The table printed in `bledfu --help` and README.md.
    public static let table: [(Int32, String)] = [
        (success, "success"),
        (failure, "other failure"),
        (noBluetoothInKernel, "this kernel has no Bluetooth support (EAFNOSUPPORT)"),
        (noAdapter, "no such Bluetooth adapter"),
        (adapterDown, "the adapter is down"),
        (permissionDenied, "permission denied (scanning needs CAP_NET_RAW)"),
        (badAddress, "bad device address"),
        (connectionTimeout, "connection timed out"),
        (disconnected, "the device disconnected"),
        (deviceNotFound, "device not found"),
        (busy, "another program holds the ATT channel of the link to the device (EBUSY)"),
        (connectionRefused, "connection refused"),
        (protocolError, "ATT/GATT error, or the device did not answer in time"),
        (noFreeLink, "the adapter has no free link (its controller's connection limit); retry when a link ends"),
        (adapterBusy, "the adapter cannot create a connection now (controller busy); retry"),
        (packageInvalid, "the DFU package is malformed or fails verification (30-39, docs/packages.md)"),
        (dfuFailed, "the DFU upload failed (40-49, docs/engine.md)"),
    ] + batchTable + [
        (usage, "bad arguments"),
        (interrupted, "interrupted (Ctrl-C)"),
    ]

    /// `bledfu batch` and `bledfu bench batch` (50-59, docs/batch.md), taken from ``BatchExit``: its table's codes in
    /// that range, then the ones only `bench batch` uses, each prefixed with the command that exits with it.
    static let batchTable: [(Int32, String)] = {
        let batch = BatchExit.table.filter { (50...59).contains($0.0) }.map { ($0.0, "batch: " + $0.1) }
        let bench = [(BatchExit.benchGoalMissed, "bench batch: the parallel/alone ratio is above --max-ratio")]
        return (batch + bench.filter { extra in !batch.contains { $0.0 == extra.0 } }).sorted { $0.0 < $1.0 }
    }()

    public static var helpText: String {
        "Exit codes:\n" + table.map { "  \($0.0)\t\($0.1)" }.joined(separator: "\n")
    }

    static func code(for error: AdapterError) -> Int32 {
        switch error.code {
        case .noBluetoothInKernel: noBluetoothInKernel
        case .noAdapter: noAdapter
        case .adapterDown: adapterDown
        case .permissionDenied: permissionDenied
        case .badAddress: badAddress
        case .connectionTimeout: connectionTimeout
        case .connectionRefused: connectionRefused
        case .busy: busy
        case .disconnected: disconnected
        case .deviceNotFound: deviceNotFound
        case .noFreeLink: noFreeLink
        case .adapterBusy: adapterBusy
        default: failure
        }
    }
}

/// An error the CLI reports as one line with its exit code.
public struct CLIError: Error, CustomStringConvertible, Sendable {
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

/// `bledfu flash` exit codes in the DFU range (40-49).
enum FlashExit {
    /// The device refused a request (remote error); see the message for the result/extended code.
    static let remoteError: Int32 = 40
    /// Checksums kept failing (CRC mismatch or lost bytes) and the engine gave up.
    static let verificationFailed: Int32 = 41
    /// The device stopped answering (checkpoint timeout), also after reconnecting.
    static let timeout: Int32 = 42
    /// The link was lost and reconnecting failed; the journal is kept, run `bledfu resume`.
    static let linkLost: Int32 = 43
    /// No bootloader advertised after the buttonless jump (or after a part reset the device).
    static let bootloaderNotFound: Int32 = 44
    /// The device has no Secure DFU service (FE59) or no usable DFU characteristic.
    static let noDFUService: Int32 = 45
    /// The device broke the DFU protocol, or package and device cannot work together.
    static let protocolError: Int32 = 46

    static let table: [(Int32, String)] = [
        (remoteError, "the device rejected a request (remote error)"),
        (verificationFailed, "CRC/verification kept failing; gave up"),
        (timeout, "the device stopped answering (timeout)"),
        (linkLost, "link lost and reconnects exhausted (resumable: bledfu resume)"),
        (bootloaderNotFound, "bootloader not found after the buttonless jump"),
        (noDFUService, "the device has no Secure DFU service"),
        (protocolError, "protocol violation, or package and device incompatible"),
        (BledfuExit.interrupted, "stopped by Ctrl-C at a safe point (resumable)"),
    ]

    static var helpText: String {
        "Exit codes: 0 success; 30-39 package invalid (see bledfu package verify); 10-20 link errors (bledfu --help);\n"
            + table.map { "  \($0.0)\t\($0.1)" }.joined(separator: "\n")
    }

    /// The exit code of an update's error.
    static func code(for error: DFUError) -> Int32 {
        switch error.code {
        case .remoteRefusal, .alreadyPresent: remoteError
        case .verificationFailed: verificationFailed
        case .timeout: timeout
        case .linkLost, .transport, .unconfirmed: linkLost
        case .notFound: bootloaderNotFound
        case .noUpdateService: noDFUService
        case .protocolViolation, .incompatiblePackage: protocolError
        case .cancelled, .stopped: BledfuExit.interrupted
        case .unknownFamily, .invalidOption: BledfuExit.usage
        case .invalidPackage: (error.cause as? PackageError)?.code.exitCode ?? BledfuExit.packageInvalid
        case .connection:
            if let adapter = error.cause as? AdapterError { BledfuExit.code(for: adapter) }
            else if let att = error.cause as? ATTClientError { CLIError(att).exitCode }
            else { BledfuExit.failure }
        default: BledfuExit.failure
        }
    }
}

