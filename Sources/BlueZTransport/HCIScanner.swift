import BLECore
import CBlueZShim
import Logging
import LinuxIO
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Scans with a raw HCI socket (linux-ble.md §2.2). Needs CAP_NET_RAW: without it the first LE command fails with
/// EPERM and the scan ends with one line saying how to grant it.
///
/// Sequence: socket(BTPROTO_HCI) → bind(hciN, raw channel) → HCI_FILTER (Command Complete/Status, LE Meta) →
/// LE Set Scan Parameters; if the controller answers Command Disallowed (0x0C) or Unknown Command (0x01), the
/// extended pair (0x2041/0x2042) is used instead; if both are refused with Command Disallowed (someone else is
/// scanning), the reports of that scan are read as they come. Scanning is disabled again at the end, also on
/// cancellation.
public struct HCIScanner: Sendable {
    public var adapter: BlueZAdapterInfo
    public var active: Bool
    /// How long one HCI command may take to be answered.
    public var commandTimeout: Duration
    var logger: Logger

    public init(adapter: BlueZAdapterInfo, active: Bool = true, commandTimeout: Duration = .seconds(2)) {
        self.adapter = adapter
        self.active = active
        self.commandTimeout = commandTimeout
        self.logger = Logger(label: "bledfu.bluez.scan")
    }

    /// The scan procedure the controller accepted.
    public enum Mode: Sendable, Hashable {
        case legacy
        case extended
        /// Another program already scans: only read.
        case listenOnly
    }

    /// Runs a scan for `duration`, calling `report` for each advertisement the folder lets through.
    public func run(
        filter: ScanFilter, duration: Duration, report: (Advertisement) -> Void
    ) async throws(AdapterError) {
        let deadline = ContinuousClock.now.advanced(by: duration)
        let fd = try open()
        defer { try? fd.close() }
        let mode = try await start(fd)
        logger.debug("scanning", metadata: ["adapter": "\(adapter.name)", "mode": "\(mode)", "duration": "\(duration)"])
        var folder = AdvertisementFolder(filter: filter)
        var failure: AdapterError?
        while ContinuousClock.now < deadline {
            do throws(Errno) {
                try await fd.waitReadable(timeout: ContinuousClock.now.duration(to: deadline))
                guard case .processed(let packet) = try fd.receive(maximumCount: 260) else { continue }
                let event: HCIEvent
                do {
                    event = try HCIEvent.decode(packet)
                } catch {
                    logger.trace("undecodable HCI packet", metadata: ["error": "\(error)"])
                    continue
                }
                if case .advertisingReports(let reports) = event {
                    for item in reports {
                        logger.trace("advertising report", metadata: ["peer": "\(item.address)"])
                        if let advertisement = folder.fold(item) { report(advertisement) }
                    }
                }
            } catch {
                logger.debug("scan ends", metadata: ["adapter": "\(adapter.name)", "reason": "\(error)"])
                if error != .timedOut && error != .canceled {
                    failure = BlueZErrors.adapterError(errno: error.rawValue, operation: .scan, adapter: adapter.name)
                }
                break
            }
        }
        await stop(fd, mode: mode)
        logger.debug("scan stopped", metadata: ["adapter": "\(adapter.name)"])
        if let failure { throw failure }
    }

    // MARK: Steps

    func open() throws(AdapterError) -> SocketDescriptor {
        try HCIChannel.openRawSocket(
            adapter: adapter, events: [HCIEvent.commandCompleteCode, HCIEvent.commandStatusCode, HCIEvent.leMetaCode],
            failing: .scan)
    }

    func start(_ fd: SocketDescriptor) async throws(AdapterError) -> Mode {
        var status = try await command(.leSetScanParameters(active: active), on: fd)
        if status == .success {
            status = try await command(.leSetScanEnable(true), on: fd)
            if status == .success { return .legacy }
        }
        guard status == .commandDisallowed || status == .unknownCommand else { throw refused(status) }
        logger.debug("legacy scan refused, trying extended scan", metadata: ["status": "\(status)"])
        var extended = try await command(.leSetExtendedScanParameters(active: active), on: fd)
        if extended == .success {
            extended = try await command(.leSetExtendedScanEnable(true), on: fd)
            if extended == .success { return .extended }
        }
        if extended == .commandDisallowed && status == .commandDisallowed {
            logger.debug("controller busy scanning for someone else: listening only")
            return .listenOnly
        }
        throw refused(extended)
    }

    /// Best effort: sends the disable command and waits (at most `commandTimeout`) for its answer.
    func stop(_ fd: SocketDescriptor, mode: Mode) async {
        let disable: HCICommand
        switch mode {
        case .legacy: disable = .leSetScanEnable(false)
        case .extended: disable = .leSetExtendedScanEnable(false)
        case .listenOnly: return
        }
        // Wait for the answer even when cancelled (in a task that is not): the kernel updates its scan state from
        // it, and a connect that starts before would find the controller disagreeing (docs/vm-test.md).
        let scanner = self
        await Task { _ = try? await scanner.command(disable, on: fd) }.value
    }

    /// Sends one command and reads events until its Command Complete / Command Status arrives.
    func command(_ command: HCICommand, on fd: SocketDescriptor) async throws(AdapterError) -> HCIStatus {
        let deadline = ContinuousClock.now.advanced(by: commandTimeout)
        do throws(Errno) {
            while case .wouldBlock = try fd.send(command.packet) {
                try await fd.waitWritable(timeout: ContinuousClock.now.duration(to: deadline))
            }
            while true {
                // Other events (advertising reports of a scan still on) keep the socket readable: the deadline is
                // checked here, not only by the wait.
                guard ContinuousClock.now < deadline else { throw Errno.timedOut }
                try await fd.waitReadable(timeout: ContinuousClock.now.duration(to: deadline))
                guard case .processed(let packet) = try fd.receive(maximumCount: 260) else { continue }
                switch try? HCIEvent.decode(packet) {
                case .commandComplete(let opcode, let status, _) where opcode == command.opcode:
                    return status ?? .success
                case .commandStatus(let opcode, let status) where opcode == command.opcode:
                    return status
                default: continue
                }
            }
        } catch {
            if error == .timedOut {
                throw AdapterError(
                    .system, "\(adapter.name) did not answer HCI command 0x\(String(command.opcode, radix: 16)) in \(commandTimeout)",
                    errno: error.rawValue)
            }
            throw BlueZErrors.adapterError(errno: error.rawValue, operation: .scan, adapter: adapter.name)
        }
    }

    private func refused(_ status: HCIStatus) -> AdapterError {
        AdapterError(.system, "\(adapter.name) refused to scan: \(status)")
    }
}
