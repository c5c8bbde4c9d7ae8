import Batch
import BLECore
import BledfuKit
import DFUCore
import DFUPackage
import Foundation
import LinuxIO
import SecureDFU
import Synchronization

/// Which parts of a package to send (`--scope`).
typealias FlashScope = PartScope

/// Everything `flash`/`resume` decided from the command line.
struct FlashSettings: Sendable {
    enum Target: Sendable {
        case address(BluetoothAddress)
        case name(String)

        var isAddress: Bool { if case .address = self { true } else { false } }
    }

    /// The package, or with ``initPacketPath`` the firmware image (`flash --image`).
    var packagePath: String
    /// `flash --image IMAGE --init DAT`: a package of the image and this init packet is built in memory.
    var initPacketPath: String?
    var keyPaths: [String] = []
    var pacing: String = "adaptive"
    var scope: FlashScope = .all
    var family: String = "auto"
    var stateDirectory: URL
    var abortOnCancel = false
    var bootloaderName: String?
    var scanTimeout: Double = 10
    var rebootDelay: Double = 0.5
    var reconnectAttempts = 5
    /// `--stall-timeout`: seconds without an event before the updater's watchdog ends the update (0: off).
    var stallTimeout: Double = 120
    var target: Target
    var addressType: AddressType = .random
    var security: UInt8?
    var adapter: String
    var json = false
    /// `--trace`/`-vv`: every ATT PDU on standard error.
    var verbose = false
    var detail = OutputDetail.normal
    var timeout: Double = 10
    var capture: String?
    /// Family settings (`smp.confirm`).
    var settings: [String: String] = [:]
    /// What choosing the device by `--name`/`--min-rssi` found (rendered before the update's own events).
    var selection: [UpdateEvent] = []

    static func duration(_ seconds: Double) -> Duration { .milliseconds(Int64((seconds * 1000).rounded())) }

    /// The package file, or the package built in memory from `--image` and `--init` (BledfuKit's
    /// `PackageSource(imageAt:initPacketAt:)`).
    func packageSource() throws(CLIError) -> PackageSource {
        do throws(DFUError) {
            let path = URL(fileURLWithPath: packagePath)
            guard let initPacketPath else { return try PackageSource(contentsOf: path) }
            return try PackageSource(imageAt: path, initPacketAt: URL(fileURLWithPath: initPacketPath))
        } catch {
            throw CLIError(error.message, exitCode: ExitCodeRegistry.code(for: error))  // 39 for a file it cannot read
        }
    }

    /// The updater's request: the package read (and its keys), the device, the options.
    func request() throws(CLIError) -> UpdateRequest {
        let package = try packageSource()
        var keys: [String] = []
        for path in keyPaths {
            do {
                keys.append(try PackageKeys.readPEM(URL(fileURLWithPath: path)))
            } catch {
                throw PackageCLI.cliError(error)
            }
        }
        let peer: UpdateTarget
        switch target {
        case .address(let address): peer = .address(PeerAddress(address, type: addressType))
        case .name(let name): peer = .name(name)
        }
        let options = UpdateOptions(
            scope: scope, verificationKeys: keys, pacing: pacing, responseTimeout: Self.duration(timeout),
            bootloaderName: bootloaderName, abortOnCancel: abortOnCancel, rebootDelay: Self.duration(rebootDelay),
            settings: settings)
        var request = UpdateRequest(
            package: package, target: peer, family: family == "auto" ? nil : DFUFamilyID(family), options: options,
            reconnect: ReconnectPolicy(attempts: reconnectAttempts), scanTimeout: Self.duration(scanTimeout),
            connectTimeout: Self.duration(timeout), securityLevel: security)
        request.stallLimit = stallTimeout > 0 ? Self.duration(stallTimeout) : nil
        return request
    }
}

/// Runs one update through the library's ``Updater``: renders its events, turns Ctrl-C into a stop at a safe point
/// (or an abort), and its end into the result line and the exit code. Throws a ``CLIError`` on failure.
func runFlash(_ settings: FlashSettings) async throws {
    if settings.json { ReaderWatch.start() }
    let renderer = FlashRenderer(json: settings.json, detail: settings.detail)
    for event in settings.selection { renderer.render(event) }
    let run: UpdateRun
    let stallLimit: Duration?
    let capture = CaptureHook(path: settings.capture, verbose: settings.verbose)
    defer { capture.close() }
    do {
        let request = try settings.request()
        stallLimit = request.stallLimit
        let store = JournalFileStore(
            directory: settings.stateDirectory, packagePath: URL(fileURLWithPath: settings.packagePath).path,
            adapter: settings.adapter, addressType: settings.addressType.rawValue)
        let updater = Updater(
            adapter: try makeFlashAdapter(settings.adapter), clock: ContinuousClock(), journal: store,
            wrapBearer: capture.wrap)
        run = updater.start(request)
    } catch {
        let failure = error as? CLIError ?? CLIError("\(error)", exitCode: BledfuExit.failure)
        renderer.finish(UpdateSummary(success: false, exitCode: Int(failure.exitCode), statistics: UpdateStatistics(), message: failure.message))
        throw failure
    }
    let interrupts = InterruptHandler {
        if settings.abortOnCancel, run.isTransferring {
            run.cancel()
        } else if run.stop() {
            renderer.render(.message("stopping after the current object (Ctrl-C again to quit at once)"))
        } else {
            Console.errorRaw("bledfu: interrupted")
            exit(BledfuExit.interrupted)
        }
    }
    defer { interrupts.cancel() }
    let device = Mutex(settings.target.addressText)
    // The last resort behind the updater's watchdog (a thread of its own; BledfuKit's UpdateBackstop).
    let backstop = UpdateBackstop.start(stallLimit: stallLimit, exitStatus: ExitCodeRegistry.code("stalled"), json: settings.json)
    defer { backstop?.stop() }
    for await event in run {
        backstop?.feed()
        if case .connecting(let address) = event { device.withLock { $0 = address } }
        renderer.render(event)
    }
    backstop?.feed()
    do {
        let result = try await run.result()
        // The families' line on how the parts got there (Legacy: restarts, bytes sent again and why).
        renderer.finish(
            UpdateSummary(success: true, exitCode: 0, statistics: result.statistics, message: result.summary),
            version: FlashText.version(packagePath: settings.packagePath, scope: settings.scope), device: result.deviceAddress)
    } catch {
        let failure = flashFailure(error, settings: settings, device: device.withLock { $0 })
        renderer.finish(
            UpdateSummary(
                success: false, exitCode: Int(failure.exitCode), error: error.code.rawValue, statistics: run.statistics,
                message: failure.message))
        throw failure
    }
}

extension FlashSettings.Target {
    var addressText: String {
        switch self {
        case .address(let address): address.description
        case .name(let name): name
        }
    }
}

/// The CLI's line for an update's error: the message with how to continue (BledfuKit's
/// `DFUError.messageWithContinuation`) and the exit code from the registry.
func flashFailure(_ error: DFUError, settings: FlashSettings, device: String) -> CLIError {
    CLIError(
        error.messageWithContinuation(device: device, adapter: settings.adapter, reconnectAttempts: settings.reconnectAttempts),
        exitCode: FlashExit.code(for: error))
}

/// `--capture` and `--trace` for every link of an update: one capture file across reconnects, each link in it with
/// its connection (peer address, handle) and disconnection (docs/captures.md).
final class CaptureHook: Sendable {
    let path: String?
    let verbose: Bool
    private let writer = Mutex<BTSnoopWriter?>(nil)

    init(path: String?, verbose: Bool) {
        self.path = path
        self.verbose = verbose
    }

    var wrap: Updater.BearerWrapper? {
        guard path != nil || verbose else { return nil }
        return { [self] bearer throws(DFUError) in try self.wrapping(bearer) }
    }

    func wrapping(_ bearer: any ATTBearer) throws(DFUError) -> any ATTBearer {
        var observers: [any PDUObserver] = []
        if let path {
            let opened = try writer.withLock { writer throws(DFUError) -> BTSnoopWriter in
                if let writer { return writer }
                do {
                    let created = try BTSnoopWriter(path: path)
                    writer = created
                    return created
                } catch {
                    throw DFUError(.capture, "cannot write capture file \(path): \(error)", cause: error)
                }
            }
            observers.append(opened.link(peer: bearer.linkInfo.peer, connectionHandle: bearer.linkInfo.connectionHandle))
        }
        if verbose { observers.append(TraceObserver()) }
        return CapturingBearer(wrapping: bearer, observers: observers)
    }

    func close() { writer.withLock { $0?.close() } }
}
